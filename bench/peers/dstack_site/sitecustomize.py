"""Points the `verda` SDK's default API base URL at a loopback simulator, and nothing else.

Put on `PYTHONPATH` (only) for the processes the peer benchmark starts from the dstack venv.
dstack 0.22.5's Verda backend (`dstack/_internal/core/backends/verda/compute.py`) and gpuhunt's
`VerdaProvider` both build `VerdaClient(client_id, client_secret)` without a `base_url`, and the
SDK (`verda` 1.25) reads no environment variable for it: the default argument,
`https://api.verda.com/v1`, is the only way in. This replaces that default with
`BENCH_VERDA_BASE_URL`, refusing any URL that is not plain HTTP(S) to 127.0.0.1.
"""

import os
from urllib.parse import urlsplit

_URL = os.environ.get("BENCH_VERDA_BASE_URL")
if _URL:
    if urlsplit(_URL).hostname != "127.0.0.1":
        raise SystemExit(f"BENCH_VERDA_BASE_URL must be on 127.0.0.1, not {_URL!r}")
    from verda import _verda

    _init = _verda.VerdaClient.__init__
    _defaults = list(_init.__defaults__ or ())
    # (base_url, inference_key): the defaults of the two optional parameters, in order.
    if not _defaults or _defaults[0] != "https://api.verda.com/v1":
        raise SystemExit(f"unexpected VerdaClient defaults {_defaults!r}; verda SDK changed?")
    _defaults[0] = _URL
    _init.__defaults__ = tuple(_defaults)
