"""``python -m deltamem`` runs the CLI."""

from deltamem.cli import main

main()
