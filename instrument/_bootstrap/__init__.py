"""The directory ``ett-instrument`` puts first on ``PYTHONPATH``: it holds ``sitecustomize``."""
