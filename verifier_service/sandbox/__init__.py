"""The code sandbox: image building CLI and the SandboxFusion-compatible /run_code API."""
