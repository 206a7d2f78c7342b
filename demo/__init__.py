"""Tooling around the platform, outside the Django package: the one-command demo
(`python -m demo`, `.ci/demo`), the portal's demo data (`demo.portal.seed_portal_demo`, used by
the browser tests, the screenshots and the portal benchmark) and the screenshots
(`python -m demo.screenshots`). The platform itself never imports this package."""
