# mypy only: the peer workloads import benchmarks/peers/_common.py by this bare name.
from benchmarks.peers._common import *  # noqa: F403
