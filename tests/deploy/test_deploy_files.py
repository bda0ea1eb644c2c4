"""The files in ``deploy/`` are checked: they parse, name only settings that exist, and pass their tools'
own checks (``nginx -t``, ``systemd-analyze verify``); the deployment guide links only files that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from blobstore.config import Settings
from tests.deploy.nginx import NGINX, command, main_config, render_single_site, render_site

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SETTINGS = frozenset(f"BLOBSTORE_{name.upper()}" for name in Settings.model_fields)
SETTING_NAME = re.compile(r"\bBLOBSTORE_[A-Z0-9_]+")
# Variables that are not settings but are read by the S3 client library.
OTHER_VARIABLES = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"})


def manifests() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        documents.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None)
    return documents


def pod_specs(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    specs = []
    for doc in documents:
        if doc["kind"] == "Deployment" or doc["kind"] == "Job":
            specs.append(doc["spec"]["template"]["spec"])
        elif doc["kind"] == "CronJob":
            specs.append(doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return specs


def test_compose_file_parses_and_names_only_existing_settings() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    names: set[str] = set()
    ours = [service for service in compose["services"].values() if service.get("image") == "mcp-blobstore"]
    assert len(ours) == 3  # the migration step and two replicas
    for service in ours:
        environment = service.get("environment", {})
        assert isinstance(environment, dict)
        names.update(environment)
    assert "BLOBSTORE_DATABASE_URL" in names
    assert {name for name in names if name.startswith("BLOBSTORE_")} <= SETTINGS
    assert names - SETTINGS <= OTHER_VARIABLES
    # Two replicas behind nginx, whose config is the shipped one.
    assert {"blobstore-1", "blobstore-2", "nginx"} <= set(compose["services"])
    assert any("./nginx.conf:" in volume for volume in compose["services"]["nginx"]["volumes"])


def test_kubernetes_manifests_parse_and_name_only_existing_settings() -> None:
    documents = manifests()
    kinds = {doc["kind"] for doc in documents}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "CronJob", "Job"} <= kinds
    for doc in documents:
        assert doc["apiVersion"]
        assert doc["metadata"]["name"]
    names: set[str] = set()
    for doc in documents:
        if doc["kind"] == "ConfigMap":
            names.update(doc["data"])
        elif doc["kind"] == "Secret":
            names.update(doc["stringData"])
    for spec in pod_specs(documents):
        for container in spec["containers"]:
            names.update(variable["name"] for variable in container.get("env", ()))
    assert {name for name in names if name.startswith("BLOBSTORE_")} <= SETTINGS
    assert names - SETTINGS <= OTHER_VARIABLES


def test_kubernetes_references_resolve_within_the_manifests() -> None:
    documents = manifests()
    defined = {(doc["kind"], doc["metadata"]["name"]) for doc in documents}
    for spec in pod_specs(documents):
        for container in spec["containers"]:
            for source in container.get("envFrom", ()):
                if "configMapRef" in source:
                    assert ("ConfigMap", source["configMapRef"]["name"]) in defined
                if "secretRef" in source:
                    assert ("Secret", source["secretRef"]["name"]) in defined
    deployment = next(doc for doc in documents if doc["kind"] == "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service = next(doc for doc in documents if doc["kind"] == "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    ports = {port["name"] for port in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert all(port["targetPort"] in ports for port in service["spec"]["ports"])


def test_systemd_units_and_containerfile_name_only_existing_settings() -> None:
    for path in [*sorted((DEPLOY / "systemd").iterdir()), DEPLOY / "Containerfile"]:
        found = set(SETTING_NAME.findall(path.read_text()))
        assert found <= SETTINGS, (path.name, found - SETTINGS)


def test_the_deployment_guide_links_only_files_that_exist() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    linked = set(re.findall(r"\.\./(deploy/[A-Za-z0-9_./-]+)", guide))
    mentioned = set(re.findall(r"`(deploy/[A-Za-z0-9_./-]+)`", guide))
    assert "deploy/compose.yaml" in linked
    assert "deploy/kubernetes/deployment.yaml" in linked
    for path in linked | mentioned:
        assert (ROOT / path).exists(), path
    assert set(SETTING_NAME.findall(guide)) <= SETTINGS


def test_nginx_config_passes_nginx_t(tmp_path: Path) -> None:
    assert shutil.which(NGINX), "nginx is not installed (.ci/run installs it)"
    main = main_config(tmp_path, render_site(18080, [18081, 18082]))
    checked = subprocess.run(command(tmp_path, main, "-t"), capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert "test is successful" in checked.stderr


def test_single_server_nginx_config_passes_nginx_t(tmp_path: Path) -> None:
    main = main_config(tmp_path, render_single_site(18080, 18081, tmp_path / "blobs"))
    checked = subprocess.run(command(tmp_path, main, "-t"), capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert "test is successful" in checked.stderr


def test_a_broken_nginx_config_fails_nginx_t(tmp_path: Path) -> None:
    # The check above can fail: a mistyped directive is refused.
    site = render_site(18080, [18081, 18082]).replace("proxy_buffering off;", "proxy_bufering off;")
    main = main_config(tmp_path, site)
    checked = subprocess.run(command(tmp_path, main, "-t"), capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0
    assert "proxy_bufering" in checked.stderr


def verify_units(tmp_path: Path, units: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # ExecStart must name an executable that exists here: the unit's /usr/local/bin/blobstore becomes this
    # environment's blobstore command, nothing else changes.
    here = Path(sys.executable).with_name("blobstore")
    for name, text in units.items():
        (tmp_path / name).write_text(text.replace("/usr/local/bin/blobstore", str(here)))
    return subprocess.run(
        ["systemd-analyze", "verify", *(f"./{name}" for name in units)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_systemd_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    assert shutil.which("systemd-analyze"), "systemd-analyze is not installed (.ci/run installs systemd)"
    units = {path.name: path.read_text() for path in sorted((DEPLOY / "systemd").iterdir())}
    verified = verify_units(tmp_path, units)
    assert verified.returncode == 0, verified.stderr
    # Unknown keys are only warnings (exit 0): any output at all counts as a failure.
    assert verified.stderr.strip() == ""
    assert verified.stdout.strip() == ""


def test_systemd_analyze_verify_reports_an_unknown_key(tmp_path: Path) -> None:
    text = (DEPLOY / "systemd" / "mcp-blobstore.service").read_text()
    verified = verify_units(tmp_path, {"mcp-blobstore.service": text.replace("UMask=", "UMaks=")})
    assert "UMaks" in verified.stderr
