"""The fleet simulator (``ett simulate``): realistic fleets of training jobs as OTLP spans."""
