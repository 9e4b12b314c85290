"""An instrumented TorchRec DLRM trainer: the workload that ETT observes.

``trainer.train:main`` is ``ett train``; ``trainer.publish:main`` is ``ett publish``. Modules:
``config`` (options), ``data`` (synthetic clicks), ``model`` (DLRM, DMP or DDP), ``distributed``
(process groups per attempt), ``checkpoint`` (DCP, committed checkpoints), ``compile_cache``
(torch.compile and its artifacts), ``faults`` (fault injection, watchdog), ``steplog`` (the
trainer's own account), ``telemetry`` (the link to ``instrument``), ``progress`` (the bar).
"""
