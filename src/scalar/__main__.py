from scalar.cli.main import main

main()
