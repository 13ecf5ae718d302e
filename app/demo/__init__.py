"""Demo mode: embedded simulators, a stock feed and a seeded history."""
