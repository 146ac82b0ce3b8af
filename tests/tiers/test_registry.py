"""The registry builds tiers with the settings the service handed to their family."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tiers import registry
from tiers.chem.dft import ChemDftTier
from tiers.chem.settings import ChemSettings
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings


@pytest.fixture
def unconfigured() -> Iterator[None]:
    registry.configure({})
    yield
    registry.configure({})


@pytest.mark.usefixtures("unconfigured")
def test_before_configure_tiers_get_their_settings_defaults() -> None:
    dft = registry.get_tier("chem.dft")
    assert isinstance(dft, ChemDftTier)
    assert dft.timeout_s == ChemSettings().dft_timeout_s
    sandbox = registry.get_tier("code.sandbox")
    assert isinstance(sandbox, SandboxTier)
    assert sandbox.settings == SandboxSettings()


@pytest.mark.usefixtures("unconfigured")
def test_configure_hands_each_family_its_settings() -> None:
    before = registry.get_tier("chem.dft")
    code = SandboxSettings(pool_size=3, max_source_bytes=1000)
    registry.configure({"chem": ChemSettings(dft_timeout_s=7.0, dft_memory_mb=900), "code": code})
    dft = registry.get_tier("chem.dft")
    assert dft is not before  # built again, with the new settings
    assert isinstance(dft, ChemDftTier)
    assert (dft.timeout_s, dft.memory_mb) == (7.0, 900)
    sandbox = registry.get_tier("code.sandbox")
    assert isinstance(sandbox, SandboxTier)
    assert sandbox.settings is code
    assert registry.get_tier("code.sandbox") is sandbox  # cached until the next configure
    assert registry.settings_for("code", SandboxSettings) is code
    registry.configure({"code": code})
    dft = registry.get_tier("chem.dft")
    assert isinstance(dft, ChemDftTier)
    assert dft.timeout_s == ChemSettings().dft_timeout_s  # a family left out: defaults


@pytest.mark.usefixtures("unconfigured")
def test_configure_refuses_unknown_families_and_wrong_models() -> None:
    with pytest.raises(ValueError, match="no tier family 'sandbox'"):
        registry.configure({"sandbox": SandboxSettings()})
    with pytest.raises(ValueError, match="must be ChemSettings, not SandboxSettings"):
        registry.configure({"chem": SandboxSettings()})


def test_tiers_do_not_import_the_service() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tiers.registry as r\n"
        "for name in r.tier_names(): r.get_tier(name)\n"
        "import tiers.code.pool, tiers.code.harness\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'verifier_service'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
