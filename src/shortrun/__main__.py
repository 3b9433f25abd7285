from shortrun.cli import main

raise SystemExit(main())
