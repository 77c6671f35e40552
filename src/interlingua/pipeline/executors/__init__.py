"""Executors beyond the in-process :class:`~interlingua.pipeline.execute.LocalExecutor`.

``RayExecutor`` (``interlingua run CONFIG --executor ray [--address ADDRESS]``)
runs the plan's content-keyed tasks as Ray tasks on a cluster whose nodes share
the run's store; see :mod:`interlingua.pipeline.executors.ray`. Ray is an optional
dependency (``pip install "interlingua[ray]"``), imported only when a Ray run
starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXECUTORS", "RayExecutor", "make_executor"]

#: Names accepted by ``--executor``.
EXECUTORS = ("local", "ray")


def make_executor(name: str = "local", *, address: str | None = None) -> Any:
    """The executor ``--executor NAME [--address ADDRESS]`` asks for."""
    from interlingua.core.errors import ConfigError

    if name == "local":
        if address is not None:
            raise ConfigError("--address names a Ray cluster: use it with --executor ray")
        from interlingua.pipeline.execute import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from interlingua.pipeline.executors.ray import RayExecutor, _import_ray

        _import_ray()  # a missing Ray is reported before any work

        return RayExecutor(address=address)
    raise ConfigError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":  # lazy: importing interlingua.pipeline.executors never imports ray
        from interlingua.pipeline.executors.ray import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'interlingua.pipeline.executors' has no attribute {name!r}")
