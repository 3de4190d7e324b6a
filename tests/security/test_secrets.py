"""Secret job env values: stored encrypted, never shown by the API, logs or audit log; opened for the agent."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import MetaData, select

from scalar.runtime.secrets import SecretBox, SecretError, open_env, redact_env, seal_job_fields
from tests.runtime.helpers import drive
from tests.security.conftest import Secured

SECRET = "hunter2-very-secret-value"
JOB = {"tier": "FAST", "gpu_count": 1, "command": ["python", "train.py"]}


def test_secret_env_values_never_leave_in_clear(secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    env = {"WANDB_API_KEY": {"value": SECRET, "secret": True}, "SEED": {"value": "7"}, "MODE": "fast"}
    with secured.client(secured.token("team-a")) as alice, secured.client(secured.admin) as admin:
        created = alice.post("/jobs", json={**JOB, "env": env})
        assert created.status_code == 201, created.text
        job = created.json()
        assert job["env"] == {"WANDB_API_KEY": "***", "SEED": "7", "MODE": "fast"}
        drive([secured.cp], secured.clock, 3)  # the controller stores its own view of the job
        answers = [
            alice.get(f"/jobs/{job['id']}"),
            alice.get("/jobs"),
            admin.get("/jobs"),
            admin.get("/audit"),
            alice.delete(f"/jobs/{job['id']}"),
        ]
        for answer in answers:
            assert answer.status_code < 300, answer.text
            assert SECRET not in answer.text
        assert answers[0].json()["env"]["WANDB_API_KEY"] == "***"
    assert SECRET not in caplog.text

    # at rest: in no table, in no form
    cp = secured.cp
    assert cp.store is not None
    tables = MetaData()
    tables.reflect(cp.store.engine)
    with cp.store.read() as tx:
        for table in tables.sorted_tables:
            for row in tx.conn.execute(select(table)):
                assert SECRET not in str(tuple(row)), table.name
        stored = tx.get_projection("jobs", job["id"])
    assert stored is not None
    sealed = stored.data["env"]["WANDB_API_KEY"]
    assert sealed.startswith("scalar-secret:v1:")
    # the agent's assignment is the one place the value is opened
    assert open_env(stored.data["env"], cp.secret_box()) == {
        "WANDB_API_KEY": SECRET,
        "SEED": "7",
        "MODE": "fast",
    }


def test_a_value_cannot_pose_as_a_sealed_one(secured_sqlite: Secured) -> None:
    with secured_sqlite.client(secured_sqlite.admin) as admin:
        response = admin.post("/jobs", json={**JOB, "env": {"X": "scalar-secret:v1:abc"}})
        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == "env"
        bad = admin.post("/jobs", json={**JOB, "env": {"X": {"value": "a", "secret": "yes"}}})
        assert bad.status_code == 422 and SECRET not in bad.text


def test_the_key_comes_from_the_environment_or_a_0600_file(tmp_path: Path) -> None:
    box = SecretBox.load(tmp_path)
    key_file = tmp_path / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    sealed = box.seal(SECRET)
    assert SECRET not in sealed
    assert SecretBox.load(tmp_path).open(sealed) == SECRET  # the same key next time
    other = SecretBox.load(tmp_path, {"SCALAR_SECRET_KEY": Fernet.generate_key().decode()})
    with pytest.raises(SecretError):
        other.open(sealed)
    with pytest.raises(SecretError):
        SecretBox.load(tmp_path, {"SCALAR_SECRET_KEY": "not-a-key"})


def test_sealing_and_redacting(tmp_path: Path) -> None:
    box = SecretBox(Fernet.generate_key())
    fields, problems = seal_job_fields(
        {"env": {"A": {"value": "x", "secret": True}, "B": "y"}, "tier": "FAST"}, lambda: box
    )
    assert problems == [] and fields["tier"] == "FAST"
    assert redact_env(fields["env"]) == {"A": "***", "B": "y"}
    assert open_env(fields["env"], box) == {"A": "x", "B": "y"}

    def no_box() -> SecretBox:
        raise AssertionError("no secret: the key is not needed")

    assert seal_job_fields({"env": {"B": "y"}}, no_box) == ({"env": {"B": "y"}}, [])
