"""pyproject.toml's dependencies: the base install is the node agent and nothing of the control plane's,
``server`` holds what the control plane imports, the extras are consistent (``dev`` installs them all), every
requirement is a version range, and requirements.lock's pins satisfy those ranges."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scalar.cli.main import DISTRIBUTION, EXTRA_OF_PACKAGE

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SELF = canonicalize_name(DISTRIBUTION)

# Distributions the node agent must never pull in (directly or through what it requires).
NOT_ON_A_NODE = {
    canonicalize_name(n)
    for n in (
        "fastapi",
        "starlette",
        "sqlalchemy",
        "alembic",
        "psycopg",
        "psycopg-binary",
        "kubernetes",
        "numpy",
        "scipy",
        "matplotlib",
        "botocore",
        "boto3",
        "paramiko",
        "uvicorn",
    )
}
EXTRAS = ("server", "aws", "k8s", "ssh", "sim", "bench", "runpod", "dev")


def requirements(extra: str | None = None) -> list[Requirement]:
    raw = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    return [Requirement(r) for r in raw]


def expanded(extras: tuple[str, ...]) -> set[str]:
    """The distribution names the base install plus ``extras`` asks for (self-references followed)."""
    names: set[str] = set()
    todo, seen = list(extras), set()
    for req in requirements():
        names.add(canonicalize_name(req.name))
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in requirements(extra):
            if canonicalize_name(req.name) == SELF:
                todo.extend(req.extras)
            else:
                names.add(canonicalize_name(req.name))
    return names


def closure(names: Iterable[str]) -> set[str]:
    """Every installed distribution ``names`` require, transitively (their own extras not taken)."""
    env = {**{key: str(value) for key, value in default_environment().items()}, "extra": ""}
    found: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(canonicalize_name(req.name))
    return found


RUN_WITH_ONLY = """
import importlib.abc, json, sys

REFUSED = frozenset(json.loads(sys.argv[1]))


class Only(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r} (not installed by this extra)", name=name)
        return None


sys.meta_path.insert(0, Only())
exec(sys.argv[2])
"""


def runs_with_only(dists: set[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where the modules of every installed distribution other than
    ``dists`` (and scalar) cannot be imported: what an install of exactly ``dists`` provides."""
    refused = {
        top
        for top, owners in packages_distributions().items()
        if top != "scalar" and not any(canonicalize_name(d) in dists for d in owners)
    }
    return subprocess.run(
        [sys.executable, "-c", RUN_WITH_ONLY, json.dumps(sorted(refused)), code],
        capture_output=True,
        text=True,
        timeout=120,
    )


AGENT = (
    "import scalar.cli.main as m\n"
    "app, left_out = m.build(m.LIGHT_COMMANDS['agent'])\n"
    "assert not left_out, left_out\n"
    "import scalar.agent.__main__, scalar.agent.node_agent, scalar.agent.runner, scalar.agent.shim\n"
    "import scalar.agent.endpoint_worker, scalar.agent.facts, scalar.agent.controller_client\n"
)
SERVER = (
    "import scalar.cli.up, scalar.cli.api, scalar.cli.controller, scalar.api.app, scalar.runtime.service\n"
)


def test_the_base_install_pulls_nothing_of_the_control_plane() -> None:
    base = {canonicalize_name(r.name) for r in requirements()}
    assert base, "the base install is the agent: it has dependencies"
    assert closure(base) & NOT_ON_A_NODE == set()


def test_the_base_install_covers_what_the_agent_imports() -> None:
    base = closure(expanded(()))
    done = runs_with_only(base, AGENT)
    assert done.returncode == 0, done.stderr
    assert runs_with_only(base, SERVER).returncode != 0  # the check can fail: the server needs more


def test_server_covers_what_the_control_plane_imports() -> None:
    done = runs_with_only(closure(expanded(("server",))), SERVER)
    assert done.returncode == 0, done.stderr


def test_each_optional_package_is_in_the_extra_the_cli_names_for_it() -> None:
    """``scalar.cli.main.EXTRA_OF_PACKAGE`` tells a user which extra to install: pyproject must agree."""
    owners = packages_distributions()
    for package, extra in EXTRA_OF_PACKAGE.items():
        dists = {canonicalize_name(d) for d in owners.get(package, [])}
        assert dists, f"{package} is installed in the test environment"
        assert dists & closure(expanded((extra,))), f"{package} is not installed by [{extra}]"
        assert not dists & closure(expanded(())), f"{package} is in the base install"


def test_the_extras_are_consistent() -> None:
    extras = PROJECT["optional-dependencies"]
    assert set(extras) == set(EXTRAS)
    dev_includes = {e for r in requirements("dev") if canonicalize_name(r.name) == SELF for e in r.extras}
    assert dev_includes == set(EXTRAS) - {"dev"}
    for extra in EXTRAS:
        for req in requirements(extra):
            if canonicalize_name(req.name) == SELF:
                assert set(req.extras) <= set(EXTRAS), f"[{extra}] names an unknown extra: {req}"
    assert expanded(("dev",)) >= {canonicalize_name(n) for n in ("pytest", "hypothesis", "playwright")}


def test_every_requirement_is_a_range_and_the_lock_satisfies_it() -> None:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[canonicalize_name(name)] = version
    checked = 0
    for extra in (None, *EXTRAS):
        for req in requirements(extra):
            if canonicalize_name(req.name) == SELF:
                continue
            operators = {spec.operator for spec in req.specifier}
            assert operators == {">=", "<"}, f"{req}: give a range >=LOCKED,<NEXT (the lock pins)"
            pin = pins.get(canonicalize_name(req.name))
            if pin is not None:
                assert req.specifier.contains(pin, prereleases=True), f"{req} excludes the lock's {pin}"
                checked += 1
    assert checked >= 25, checked
