"""ETT instrumentation: the library a PyTorch trainer imports to emit ETT spans.

    import ett

    sess = ett.init(model="dlrm")          # identity from the environment (ETT_JOB_ID, RANK, ...)
    with sess.startup("model_init"):
        model = build_model()
    sess.first_batch(step=start_step)
    for batch in loader:
        train_step(batch)
        sess.step(samples=len(batch))      # counters only: no span per step
    sess.end()                             # also done at exit, on SIGTERM, on an uncaught error

See ``docs/instrument.md``. Torch integrations live in :mod:`ett.torch_hooks`.
"""

from . import semconv
from ._config import Identity
from ._errors import LOGGER_NAME
from ._failure import Guard, is_peer_loss
from ._failure import classify as classify_failure
from ._hooks import Preempted
from ._session import Session
from ._setup import AttemptScope, attempt, current, init
from ._spans import CheckpointSave, SpanBlock
from ._stalls import DATA_WAIT_MIN_S

__all__ = [
    "DATA_WAIT_MIN_S",
    "LOGGER_NAME",
    "AttemptScope",
    "CheckpointSave",
    "Guard",
    "Identity",
    "Preempted",
    "Session",
    "SpanBlock",
    "__version__",
    "attempt",
    "classify_failure",
    "current",
    "init",
    "is_peer_loss",
    "semconv",
]


def __getattr__(name: str) -> str:
    """``ett.__version__``: the installed distribution's version, read when first asked."""
    if name == "__version__":
        from ._auto import version

        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
