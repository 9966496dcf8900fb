from ledgerport.cli import main

raise SystemExit(main())
