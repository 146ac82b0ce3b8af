"""The web layer every page of the service stands on: one renderer (Jinja2, CSRF token and
security headers included), one base template and stylesheet, the static files served from one
declared route, and the HTML error pages a person's browser gets instead of JSON."""
