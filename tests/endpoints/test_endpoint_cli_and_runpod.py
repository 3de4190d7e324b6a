"""``scalar endpoint deploy|list|get|logs|delete`` against a live server, and ``deploy --target runpod``
against a loopback GraphQL server speaking RunPod's saveEndpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalar.cli.main import app
from tests.endpoints.harness import endpoint_api
from tests.providers.fakeserver import FakeServer, Reply

SPEC_YAML = """\
name: cli-demo
imageName: example/infer:1
gpus: [AMPERE_80, ADA_80_PRO]
cudaVersions: ["12.4"]
workersMax: 2
scalerType: REQUEST_COUNT
scalerValue: 3
"""


def test_deploy_list_get_logs_delete_through_the_cli(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(SPEC_YAML)
    runner = CliRunner()
    with endpoint_api(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path) as (client, _plane, _clock):
        url = str(client.base_url)
        deployed = runner.invoke(app, ["endpoint", "deploy", str(spec_path), "--server", url, "--json"])
        assert deployed.exit_code == 0, deployed.output
        eid = json.loads(deployed.stdout)["id"]
        listed = runner.invoke(app, ["endpoint", "list", "--server", url, "--json"])
        assert [e["id"] for e in json.loads(listed.stdout)["endpoints"]] == [eid]
        table = runner.invoke(app, ["endpoint", "list", "--server", url], env={"COLUMNS": "250"})
        assert table.exit_code == 0 and "TENANT" in table.stdout.upper() and eid in table.stdout
        shown = runner.invoke(app, ["endpoint", "get", eid, "--server", url])
        assert shown.exit_code == 0 and "cli-demo" in shown.stdout
        logs = runner.invoke(app, ["endpoint", "logs", eid, "--server", url, "--json"])
        assert logs.exit_code == 0 and json.loads(logs.stdout)["id"] == eid
        again = runner.invoke(app, ["endpoint", "deploy", str(spec_path), "--server", url])
        assert again.exit_code == 2 and "name" in again.output
        assert runner.invoke(app, ["endpoint", "delete", eid, "--server", url]).exit_code == 0
        assert runner.invoke(app, ["endpoint", "get", "ep-nope", "--server", url]).exit_code == 2


def test_a_bad_spec_file_names_the_field_before_anything_is_sent(tmp_path: Path) -> None:
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text(SPEC_YAML.replace("AMPERE_80", "A100"))
    result = CliRunner().invoke(app, ["endpoint", "deploy", str(spec_path), "--server", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "gpus[0]" in result.output and "AMPERE_80" in result.output


@pytest.fixture
def runpod() -> FakeServer:
    with FakeServer() as fake:
        yield fake


def test_deploy_to_runpod_sends_save_endpoint_with_gpu_ids_and_cuda_versions(
    tmp_path: Path, runpod: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    runpod.route("POST", "/graphql", Reply.json({"data": {"saveEndpoint": {"id": "rp-ep-1"}}}))
    monkeypatch.setenv("SCALAR_RUNPOD_API_KEY", "rp-test")
    monkeypatch.setenv("SCALAR_RUNPOD_BASE_URL", runpod.url)
    spec_path = tmp_path / "spec.yaml"
    template = (
        "template:\n  containerDiskInGb: 30\n  env: [{key: MODEL, value: small}, {key: MODE, value: a}]\n"
    )
    spec_path.write_text(SPEC_YAML + template + "env: {MODE: b}\n")
    result = CliRunner().invoke(app, ["endpoint", "deploy", str(spec_path), "--target", "runpod", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["id"] == "rp-ep-1"
    sent = runpod.requests[0].json()
    assert sent["query"].startswith("mutation saveEndpoint")
    fields = sent["variables"]["input"]
    assert fields["gpuIds"] == "AMPERE_80,ADA_80_PRO" and fields["allowedCudaVersions"] == "12.4"
    assert (fields["scalerType"], fields["scalerValue"], fields["workersMax"]) == ("REQUEST_COUNT", 3, 2)
    assert fields["template"]["imageName"] == "example/infer:1"
    # the template's env (the spec's env overriding it) and its disk reach RunPod
    assert fields["template"]["env"] == [{"key": "MODEL", "value": "small"}, {"key": "MODE", "value": "b"}]
    assert fields["template"]["containerDiskInGb"] == 30


def test_deploy_to_runpod_without_a_key_says_how_to_configure_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SCALAR_RUNPOD_API_KEY", raising=False)
    monkeypatch.delenv("SCALAR_RUNPOD_BASE_URL", raising=False)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(SPEC_YAML)
    result = CliRunner().invoke(app, ["endpoint", "deploy", str(spec_path), "--target", "runpod"])
    assert result.exit_code == 1 and "SCALAR_RUNPOD_API_KEY" in result.output
