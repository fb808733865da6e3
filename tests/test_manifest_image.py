"""The deploy step sets the scaler's image in one place for every manifest set, rendered by kubectl.

Rendering uses the real ``kubectl kustomize`` (kubectl's built-in kustomize, what
``kubectl apply -k`` runs), not a reader of our own: what broke was kustomize's own
semantics (an image set in ``manifests/`` does not reach ``manifests/with-monitoring/``,
which builds from ``manifests/base``), which a hand-written reader would only restate.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler import __version__
from tests.conftest import require_kubectl
from tests.test_manifests import build

pytestmark = pytest.mark.e2e  # every test renders with kubectl in a subprocess

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()
REGISTRY = "registry.test:5000/inference"  # stands for the deploy guide's REGISTRY
TAG = "1.2.3-rc.1"  # stands for the deploy guide's tag
GIVEN = f"{REGISTRY}/llm-gpu-scaler:{TAG}"
# The sets that install the scaler; the example installs a vLLM workload, grafana a ConfigMap.
SCALER_SETS = {".", "base", "with-monitoring"}


def render(folder: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize FOLDER`` renders."""
    kubectl = require_kubectl()
    result = subprocess.run(
        [kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {folder}:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def images(node: Any) -> Iterator[str]:
    """Every container image in ``node``: containers, initContainers and ephemeralContainers, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers", "ephemeralContainers"):
                yield from (container["image"] for container in value)
            else:
                yield from images(value)
    elif isinstance(node, list):
        for item in node:
            yield from images(item)


def manifest_sets(root: Path) -> list[str]:
    """Every folder under ``root`` whose kustomization is a Kustomization (a set one can apply)."""
    return sorted(
        str(path.parent.relative_to(root))
        for path in root.rglob("kustomization.yaml")
        if yaml.safe_load(path.read_text())["kind"] == "Kustomization"
    )


def guide_step() -> tuple[str, list[dict[str, str]]]:
    """docs/deploy.md's install step's file and ``images:`` entry, the test's registry and tag for
    the user's."""
    section = DEPLOY[DEPLOY.index("## Install\n") :]
    section = section[: section.index("\n## ", 1)]
    blocks = [textwrap.dedent(b) for b in re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)]
    (block,) = [b for b in blocks if "\nimages:\n" in b]
    path = block.splitlines()[0].removeprefix("# ")
    assert path.startswith("manifests/"), f"the step's block names no file under manifests/: {path}"
    given = block.replace("REGISTRY", REGISTRY).replace(f"newTag: {__version__}", f"newTag: {TAG}")
    entry: list[dict[str, str]] = yaml.safe_load(given)["images"]
    return path, entry


def take_the_guide_s_step(root: Path) -> None:
    """The deploy guide's step in the clone at ``root``: its images: entry in the file it names."""
    path, entry = guide_step()
    kustomization = yaml.safe_load((root / path).read_text())
    kustomization["images"] = entry
    (root / path).write_text(yaml.safe_dump(kustomization, sort_keys=False))


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    """A copy of manifests/ in a clone of the test's, for the test to edit as the guide says."""
    return Path(shutil.copytree(MANIFESTS, tmp_path / "manifests"))


def test_every_set_renders_the_image_the_guide_s_step_gave(copied: Path) -> None:
    """After the guide's step, every set that installs the scaler runs the given image, and only there."""
    before = {name: sorted(images(render(copied / name))) for name in manifest_sets(copied)}
    take_the_guide_s_step(copied.parent)
    after = {name: sorted(images(render(copied / name))) for name in manifest_sets(copied)}
    assert set(after) >= SCALER_SETS | {"example", "grafana"}, "every set is rendered"
    for name, found in after.items():
        if name in SCALER_SETS:
            assert found, f"{name}: renders no container"
            assert set(found) == {GIVEN}, f"{name}: {found}"
        else:
            assert found == before[name], f"{name}: the step changed an image that is not the scaler's"
    assert {name for name, found in after.items() if GIVEN in found} == SCALER_SETS


@pytest.mark.parametrize("resource", ["manifests", "manifests/with-monitoring"])
def test_an_overlay_of_ones_own_sets_the_image_the_same_way(tmp_path: Path, resource: str) -> None:
    """The guide's images: entry in an overlay of one's own that lists a set renders the given image."""
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    overlay = tmp_path / "my-scaler"
    overlay.mkdir()
    kustomization = {"resources": [f"../{resource}"], "images": guide_step()[1]}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    assert set(images(render(overlay))) == {GIVEN}


def test_untouched_sets_run_the_packages_version() -> None:
    """As cloned, every set that installs the scaler runs llm-gpu-scaler at the package's version."""
    for name in SCALER_SETS:
        assert set(images(render(MANIFESTS / name))) == {f"llm-gpu-scaler:{__version__}"}, name


def test_the_manifest_reader_lists_what_kubectl_renders() -> None:
    """tests/test_manifests.py's reader finds the same objects, in the same namespaces, as kubectl."""
    for name in manifest_sets(MANIFESTS):
        rendered = {
            (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
            for o in render(MANIFESTS / name)
        }
        read = {
            (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
            for o in build(MANIFESTS / name)
        }
        assert read == rendered, name
