"""The local dev stack behind ``mindforge dev up|down|status``.

One small class per component, each answering ``status()``, ``up()`` and ``down()``:
sandboxes (:mod:`~mindforge.devstack.sandbox`: Docker engine, base image, registry
check) first, then orchestration (:mod:`~mindforge.devstack.services`: the Temporal dev
server, a Ray head). Every ``up`` is idempotent and quick when the component is up. The
interface and helpers are in :mod:`~mindforge.devstack.base`.
"""

from __future__ import annotations

from mindforge.devstack.base import (
    Component,
    ComponentStatus,
    DevStackError,
    Say,
    write_setting,
)
from mindforge.devstack.sandbox import (
    BaseImageComponent,
    DockerComponent,
    RegistryComponent,
    registry_answers,
)
from mindforge.devstack.services import RayComponent, TemporalComponent, tcp_answers
from mindforge.settings import Settings

# --------------------------------------------------------------------------- the stack

#: sandbox components in start order (``down`` runs in reverse); see :func:`component_types`
COMPONENT_TYPES: list[type[Component]] = [DockerComponent, BaseImageComponent, RegistryComponent]


def component_types() -> list[type[Component]]:
    """Every component class in start order: sandboxes first, then Temporal and Ray."""
    return [*COMPONENT_TYPES, TemporalComponent, RayComponent]


def component_names() -> list[str]:
    """Names accepted by ``--component``."""
    return [c.name for c in component_types()]


def components(settings: Settings, names: list[str] | None = None) -> list[Component]:
    """The stack's components (all, or those named), in start order.

    Raises:
        ValueError: an unknown name.
    """
    known = component_names()
    unknown = sorted(set(names or []) - set(known))
    if unknown:
        raise ValueError(f"unknown component(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [cls(settings) for cls in component_types() if not names or cls.name in names]


def dev_up(settings: Settings, names: list[str] | None = None, say: Say = print) -> list[ComponentStatus]:
    """Bring the stack (or the named components) up, in order.

    Raises:
        DevStackError: a component cannot be brought up.
    """
    return [component.up(say) for component in components(settings, names)]


def dev_down(settings: Settings, names: list[str] | None = None, say: Say = print) -> list[ComponentStatus]:
    """Stop what ``dev_up`` started, in reverse order; never touches what it did not start."""
    return [component.down(say) for component in reversed(components(settings, names))]


def dev_status(settings: Settings, names: list[str] | None = None) -> list[ComponentStatus]:
    """Each component's status (changes nothing)."""
    return [component.status() for component in components(settings, names)]


__all__ = [
    "BaseImageComponent",
    "Component",
    "ComponentStatus",
    "DevStackError",
    "DockerComponent",
    "RayComponent",
    "RegistryComponent",
    "Say",
    "TemporalComponent",
    "component_names",
    "component_types",
    "components",
    "dev_down",
    "dev_status",
    "dev_up",
    "registry_answers",
    "tcp_answers",
    "write_setting",
]
