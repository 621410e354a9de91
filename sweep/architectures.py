BUILTIN: dict = {}
