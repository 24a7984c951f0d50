from talent_core.commands import app

app()
