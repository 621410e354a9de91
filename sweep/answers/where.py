"""``--where``: a small, safe filter language over a dataset's columns, compiled to Arrow.

A tokenizer and a recursive-descent parser turn the text into a
:class:`pyarrow.compute.Expression`; nothing is ever evaluated as Python.
Column names are checked against the dataset's schema and operand kinds
(number, string, bool) are checked while parsing, so a mistake is one line
naming the position. The expression is handed to Arrow's scanner, which
skips row groups whose min/max statistics cannot match (``p >= 512`` reads
only the row groups holding such p).

Grammar (lowest precedence first; keywords are case-insensitive)::

    expr    := and ( ("or" | "||") and )*
    and     := not ( ("and" | "&&") not )*
    not     := ("not" | "!") not | compare
    compare := sum ( OP sum )*              OP: == = != < <= > >=, chains as in Python
             | sum ["not"] "in" ( "(" | "[" ) literal ("," literal)* [","] ( ")" | "]" )
    sum     := product ( ("+" | "-") product )*
    product := unary ( ("*" | "/") unary )*
    unary   := "-" unary | "+" unary | atom
    atom    := NUMBER | STRING | "true" | "false" | COLUMN | `any column` | "(" expr ")"

Numbers: ``1024``, ``12.5e9``, ``1_000``; strings in single or double quotes;
``/`` divides as float64. A bare bool column (``feasible``) is a condition.
Examples: ``p >= 256 and strategy in ("data", "data+filter")``,
``not feasible``, ``t_comm_s / t_epoch_s > 0.5``, ``64 <= p <= 1024``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from sweep.errors import InputError

NUM, STR, BOOL = "number", "string", "bool"


def _error(message: str) -> InputError:
    """A mistake in the filter text, said of the parameter ``where`` (the CLI's ``--where``)."""
    return InputError(f"where: {message}", param="where")


_KEYWORDS = {"and", "or", "not", "in", "true", "false"}
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<quoted>`[^`]+`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[=<>()\[\],+\-*/!])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # num, str, name, op, end
    text: str
    pos: int  # 1-based character position
    value: object = None


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; an :class:`InputError` at the first character that fits none."""
    out: list[Token] = []
    i = 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            raise _error(f"unexpected character {text[i]!r} at position {i + 1}")
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "num":
            digits = raw.replace("_", "")
            value: object = int(digits) if re.fullmatch(r"\d+", digits) else float(digits)
            out.append(Token("num", raw, i + 1, value))
        elif kind == "str":
            body = re.sub(r"\\(.)", r"\1", raw[1:-1])
            out.append(Token("str", raw, i + 1, body))
        elif kind == "quoted":
            out.append(Token("name", raw, i + 1, raw[1:-1]))
        elif kind == "name":
            low = raw.lower()
            if low in _KEYWORDS:
                out.append(Token("op", low, i + 1))
            else:
                out.append(Token("name", raw, i + 1, raw))
        elif kind == "op":
            out.append(Token("op", {"&&": "and", "||": "or", "!": "not", "=": "=="}.get(raw, raw), i + 1))
        i = m.end()
    out.append(Token("end", "end of text", len(text) + 1))
    return out


@dataclass
class _Node:
    """A parsed sub-expression: an Arrow expression or a Python constant, and its kind."""

    kind: str
    expr: pc.Expression | None = None
    const: object = None
    column: str | None = None  # the column it is, when it is one bare column

    @property
    def is_const(self) -> bool:
        return self.expr is None

    def arrow(self) -> pc.Expression:
        return self.expr if self.expr is not None else pc.scalar(self.const)


@dataclass
class Filter:
    """A compiled ``--where``: the Arrow expression, the columns it reads, and its text."""

    expression: pc.Expression
    columns: tuple[str, ...]
    text: str


def legal_values(column: str) -> tuple[str, ...]:
    """The names a categorical column can hold (``()`` for any other column): a strategy's
    categorical axis or a categorical machine setting
    (:func:`sweep.output.categories.choices_of`), and ``strategy``, the registry's names."""
    from sweep.output.categories import choices_of

    if column == "strategy":
        from kernels.strategies.registry import REGISTRY

        return tuple(REGISTRY)
    return choices_of(column)


def _kind_of(dtype: pa.DataType) -> str | None:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_boolean(dtype):
        return BOOL
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        return NUM
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return STR
    return None


@dataclass
class _Parser:
    tokens: list[Token]
    schema: pa.Schema
    i: int = 0
    used: list[str] = field(default_factory=list)

    # -- helpers -------------------------------------------------------------
    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def accept(self, *ops: str) -> Token | None:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ops:
            self.i += 1
            return tok
        return None

    def expect(self, op: str, what: str) -> Token:
        tok = self.accept(op)
        if tok is None:
            self.fail(self.peek(), f"expected {what}")
        assert tok is not None
        return tok

    def fail(self, tok: Token, message: str):
        shown = tok.text if tok.kind == "end" else repr(tok.text)
        raise _error(f"{message} at position {tok.pos} (found {shown})")

    def holdable(self, column: _Node, value: _Node) -> None:
        """A name compared with a categorical column must be one it can hold: a misspelt
        ``'selectve'`` would match no row and give an empty answer without a word."""
        if column.column is None or not value.is_const or not isinstance(value.const, str):
            return
        legal = legal_values(column.column)
        if legal and value.const not in legal:
            raise _error(f"{column.column} is one of {', '.join(legal)}; no row can hold {value.const!r}")

    def need(self, node: _Node, kind: str, tok: Token, what: str) -> None:
        if node.kind != kind:
            self.fail(tok, f"{what} needs a {kind}, not a {node.kind}")

    # -- grammar ---------------------------------------------------------------
    def parse(self) -> _Node:
        node = self.or_()
        if self.peek().kind != "end":
            self.fail(self.peek(), "expected an operator or the end")
        return node

    def or_(self) -> _Node:
        start = self.peek()
        node = self.and_()
        while (tok := self.accept("or")) is not None:
            right = self.and_()
            self.need(node, BOOL, start, "'or'")
            self.need(right, BOOL, tok, "'or'")
            node = _Node(BOOL, node.arrow() | right.arrow())
        return node

    def and_(self) -> _Node:
        start = self.peek()
        node = self.not_()
        while (tok := self.accept("and")) is not None:
            right = self.not_()
            self.need(node, BOOL, start, "'and'")
            self.need(right, BOOL, tok, "'and'")
            node = _Node(BOOL, node.arrow() & right.arrow())
        return node

    def not_(self) -> _Node:
        tok = self.accept("not")
        if tok is not None:
            inner = self.not_()
            self.need(inner, BOOL, tok, "'not'")
            if inner.is_const:
                return _Node(BOOL, const=not inner.const)
            return _Node(BOOL, ~inner.arrow())
        return self.compare()

    def compare(self) -> _Node:
        start = self.peek()
        left = self.sum_()
        negate = False
        if self.peek().kind == "op" and self.peek().text == "not" and self.tokens[self.i + 1].text == "in":
            self.take()
            negate = True
        if (tok := self.accept("in")) is not None:
            return self.in_list(left, start, negate)
        parts: list[_Node] = []
        ops = ("==", "!=", "<", "<=", ">", ">=")
        while (tok := self.accept(*ops)) is not None:
            right = self.sum_()
            if tok.text in ("<", "<=", ">", ">=") and not (left.kind == right.kind and left.kind != BOOL):
                self.fail(
                    tok, f"'{tok.text}' compares two numbers or two strings, not {left.kind} and {right.kind}"
                )
            if left.kind != right.kind:
                self.fail(tok, f"'{tok.text}' cannot compare a {left.kind} with a {right.kind}")
            if tok.text in ("==", "!="):
                self.holdable(left, right)
                self.holdable(right, left)
            parts.append(self.cmp(tok.text, left, right))
            left = right
        if not parts:
            return left
        node = parts[0]
        for more in parts[1:]:
            node = _Node(BOOL, node.arrow() & more.arrow())
        return node

    @staticmethod
    def cmp(op: str, a: _Node, b: _Node) -> _Node:
        x, y = a.arrow(), b.arrow()
        out = {
            "==": lambda: x == y,
            "!=": lambda: x != y,
            "<": lambda: x < y,
            "<=": lambda: x <= y,
            ">": lambda: x > y,
            ">=": lambda: x >= y,
        }[op]()
        return _Node(BOOL, out)

    def in_list(self, left: _Node, start: Token, negate: bool) -> _Node:
        opener = self.accept("(", "[")
        if opener is None:
            self.fail(self.peek(), "expected '(' or '[' after 'in'")
        assert opener is not None
        closer = ")" if opener.text == "(" else "]"
        values: list[object] = []
        while True:
            if self.accept(closer) is not None:
                break
            tok = self.peek()
            item = self.unary()
            if not item.is_const:
                self.fail(tok, "'in' takes a list of literal values")
            if item.kind != left.kind:
                self.fail(tok, f"'in' list of a {left.kind} holds a {item.kind}")
            self.holdable(left, item)
            values.append(item.const)
            if self.accept(",") is None:
                self.expect(closer, f"',' or '{closer}'")
                break
        if not values:
            self.fail(opener, "'in' needs at least one value")
        if left.is_const:
            hit = left.const in values
            return _Node(BOOL, const=hit != negate)
        member = left.arrow().isin(values)
        return _Node(BOOL, ~member if negate else member)

    def sum_(self) -> _Node:
        node = self.product()
        while (tok := self.accept("+", "-")) is not None:
            right = self.product()
            node = self.arith(tok, node, right)
        return node

    def product(self) -> _Node:
        node = self.unary()
        while (tok := self.accept("*", "/")) is not None:
            right = self.unary()
            node = self.arith(tok, node, right)
        return node

    def arith(self, tok: Token, a: _Node, b: _Node) -> _Node:
        if a.kind != NUM or b.kind != NUM:
            self.fail(tok, f"'{tok.text}' needs two numbers, not {a.kind} and {b.kind}")
        op = tok.text
        if a.is_const and b.is_const:
            x, y = a.const, b.const
            assert isinstance(x, int | float) and isinstance(y, int | float)
            if op == "/":
                return _Node(NUM, const=float(x) / float(y) if y != 0 else float("nan"))
            return _Node(NUM, const={"+": x + y, "-": x - y, "*": x * y}[op])
        x_e, y_e = a.arrow(), b.arrow()
        if op == "/":
            return _Node(NUM, pc.divide(x_e.cast(pa.float64()), y_e.cast(pa.float64())))
        fn = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[op]
        return _Node(NUM, fn(x_e, y_e))

    def unary(self) -> _Node:
        tok = self.accept("-", "+")
        if tok is not None:
            inner = self.unary()
            if inner.kind != NUM:
                self.fail(tok, f"unary '{tok.text}' needs a number, not a {inner.kind}")
            if tok.text == "+":
                return inner
            if inner.is_const:
                assert isinstance(inner.const, int | float)
                return _Node(NUM, const=-inner.const)
            return _Node(NUM, pc.negate(inner.arrow()))
        return self.atom()

    def atom(self) -> _Node:
        tok = self.take()
        if tok.kind == "num":
            return _Node(NUM, const=tok.value)
        if tok.kind == "str":
            return _Node(STR, const=tok.value)
        if tok.kind == "op" and tok.text in ("true", "false"):
            return _Node(BOOL, const=tok.text == "true")
        if tok.kind == "name":
            name = str(tok.value)
            if name not in self.schema.names:
                raise _error(
                    f"unknown column '{name}' at position {tok.pos} (known: {', '.join(self.schema.names)})"
                )
            kind = _kind_of(self.schema.field(name).type)
            if kind is None:
                self.fail(
                    tok, f"column '{name}' has type {self.schema.field(name).type}, which a filter cannot use"
                )
            assert kind is not None
            if name not in self.used:
                self.used.append(name)
            return _Node(kind, pc.field(name), column=name)
        if tok.kind == "op" and tok.text == "(":
            node = self.or_()
            self.expect(")", "')'")
            return node
        self.i -= 1
        self.fail(tok, "expected a value, a column or '('")
        raise AssertionError  # unreachable


def parse_where(text: str, schema: pa.Schema) -> Filter:
    """Compile ``text`` against ``schema``; :class:`InputError` (one line) on any mistake."""
    if not text or not text.strip():
        raise _error("empty expression")
    parser = _Parser(tokenize(text), schema)
    node = parser.parse()
    if node.kind != BOOL:
        raise _error(f"'{text.strip()}' is a {node.kind}, not a condition (try a comparison)")
    expr = node.arrow() if not node.is_const else pc.scalar(bool(node.const))
    _check_runs(expr, schema, text)
    return Filter(expr, tuple(parser.used), text)


def _check_runs(expr: pc.Expression, schema: pa.Schema, text: str) -> None:
    """Run the expression on an empty table of ``schema``: Arrow's own type errors become one line."""
    import pyarrow.dataset as ds

    try:
        ds.dataset(schema.empty_table()).to_table(filter=expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise _error(f"'{text.strip()}' cannot run: {first}") from None


def combine(filters: Iterable[pc.Expression | None]) -> pc.Expression | None:
    """The conjunction of the given expressions (None entries ignored); None when there are none."""
    out: pc.Expression | None = None
    for f in filters:
        if f is None:
            continue
        out = f if out is None else out & f
    return out
