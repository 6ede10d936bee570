"""gpuplan's bottom layer, shared by allocator, forecasting and pipelines.

- `errors`: the one error type for bad input (InputError), one line and exit 2 at the CLI.
- `limits`: the size and value ceilings every loader enforces.
- `timeparse`: ISO time parsing with located errors (every time column, option and file
  field, and the conversion of a given timestamp to UTC).
- `readers`: the one CSV/Parquet table reader and the one finite-only JSON reader.
- `markdown`: the one Markdown table writer.
- `atomic`: atomic file output (write beside, fsync, rename) and finite-only JSON.
- `envelope`: the swap-limit envelope the forecaster shapes demand with and the policies
  follow, one implementation so both agree on switching cost.

It imports nothing else of gpuplan (`lint-imports` checks it, pyproject.toml
[tool.importlinter]): forecasting reaches allocator only through here.
"""
