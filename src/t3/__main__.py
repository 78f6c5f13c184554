from t3.cli.main import main

main()
