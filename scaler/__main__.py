from scaler.cli import main

raise SystemExit(main())
