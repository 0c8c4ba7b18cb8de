package main

// runBench will benchmark a running cluster; not written yet.
func runBench(args []string) int { return exitError }
