"""ETT collector: OTLP in, ETT figures out."""
