from talent_core.cli import app

app()
