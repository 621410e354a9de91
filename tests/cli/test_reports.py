"""What the reports print beside their figures (issue 38, defect 10): a t_iter_s co-design's
best configurations show compute and communication per iteration, not per epoch."""

from __future__ import annotations

from sweep.answers.codesign import _format_row

#: A hand-made answer row: 100 iterations per epoch, 120 s of compute and 30 s of communication
#: per epoch, so 1.2 s and 0.3 s per iteration beside t_iter_s = 1.5 s.
ROW = {
    "strategy": "data+tensor+pipeline", "p": 1024, "b": 192, "p2": 64, "S": 192, "global_batch": 1536,
    "micro_batch": 1, "tp": 8, "pp": 8, "iterations": 100, "t_epoch_s": 150.0, "t_iter_s": 1.5,
    "t_comp_s": 120.0, "t_comm_s": 30.0, "mem_bytes": 6.0e10, "feasible": True, "limit_reason": None,
}  # fmt: skip


def test_a_per_iteration_metric_shows_compute_and_communication_per_iteration():
    line = _format_row(ROW, "t_iter_s")
    assert "t_iter_s=1.5  t_comp_per_iter_s=1.2  t_comm_per_iter_s=0.3" in line
    assert "t_comp_s=120" not in line


def test_a_per_epoch_metric_keeps_the_per_epoch_terms():
    assert "t_epoch_s=150  t_comp_s=120  t_comm_s=30" in _format_row(ROW, "t_epoch_s")


def test_library_errors_name_parameters_and_the_cli_writes_flags(tmp_path):
    """The library's message names the parameter ``machine``; the CLI writes it ``--machine``, and
    leaves the quoted column name as it is."""
    import pytest

    from sweep.errors import InputError
    from sweep.inputs.measured import read_measurements
    from tests.runs import sweep

    path = tmp_path / "runs.csv"
    path.write_text("model,strategy,p,b,iter_time_s\nresnet50,data,8,32,0.2\n")
    with pytest.raises(InputError) as err:
        read_measurements(path)
    assert "--" not in str(err.value) and err.value.param == ("machine",)
    result = sweep("validate", str(path))
    assert result.exit_code == 2
    assert result.output.strip().endswith("no 'machine' column: give one --machine for every row")
