from verifier_service.launcher import main

main()
