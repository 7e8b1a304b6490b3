"""``python -m deltamem.cli`` runs the CLI."""

from deltamem.cli import main

main()
