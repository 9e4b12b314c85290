"""The fleet simulator (``ett simulate``): realistic fleets of training jobs as OTLP spans.

The Python API other parts' tests use (see :mod:`ett_simulator.simulation`)::

    from ett_simulator import differences, read_truth, simulate_into_db, simulate_to_endpoint
    truths = simulate_into_db("sqlite:///fleet.db", jobs=30, days=14, seed=1, start=start_s,
                              regress=["model=dlrm-large component=checkpoint factor=3 at=..."])
    # each Truth has the read API's field names: job_id, wall_s, productive_s, ...
    jobs, regressions = read_truth("truth.jsonl")  # what `ett simulate --truth FILE` wrote

The history ends at ``start + days`` (default: now); a job that would still be running then is
left out whole (:mod:`ett_simulator.fleet`).
"""

from .fleet import FleetSpec, generate, job_specs
from .profile import DEFAULT_PROFILE, Profile, ProfileError, load_profile
from .regression import Regression, parse_regression
from .simulation import SimulationResult, simulate, simulate_into_db, simulate_to_endpoint
from .straggler import Straggler, parse_straggler
from .truth import Truth, differences
from .truth_file import TruthFile, TruthFileError, read_stragglers, read_truth

__all__ = [
    "DEFAULT_PROFILE",
    "FleetSpec",
    "Profile",
    "ProfileError",
    "Regression",
    "SimulationResult",
    "Straggler",
    "Truth",
    "TruthFile",
    "TruthFileError",
    "differences",
    "generate",
    "job_specs",
    "load_profile",
    "parse_regression",
    "parse_straggler",
    "read_stragglers",
    "read_truth",
    "simulate",
    "simulate_into_db",
    "simulate_to_endpoint",
]
