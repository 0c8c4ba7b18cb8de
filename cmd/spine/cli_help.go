package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Example sections of the commands' --help, by command
// path. TestHelpExamplesParse runs every line that starts with "spine"
// (after an optional "… |") through the command tree: each must name a
// command and only flags it has.
var examples = map[string]string{
	"spine serve": `spine serve --node-id n1 --data-dir data/n1 --bootstrap
spine serve --node-id n2 --data-dir data/n2 --http-addr 127.0.0.1:36735 --raft-addr 127.0.0.1:36736 --gossip-addr 127.0.0.1:36737 --join http://127.0.0.1:36725`,

	"spine jobs create": `spine jobs create --payload '{"task":"summarise","url":"https://example.com"}'
spine jobs create --payload-file job.json --stream high --max-attempts 3
echo '{"n":1}' | spine jobs create -`,
	"spine jobs list": `spine jobs list --status queued -o table
spine jobs list --local --limit 10
spine jobs list --dlq -o table`,
	"spine jobs get":       `spine jobs get JOB_ID -o table`,
	"spine jobs events":    `spine jobs events JOB_ID -o table`,
	"spine jobs attempts":  `spine jobs attempts JOB_ID -o table`,
	"spine jobs claim":     `spine jobs claim JOB_ID --worker-id claw-1`,
	"spine jobs heartbeat": `spine jobs heartbeat JOB_ID --lease-token LEASE_TOKEN --attempt-id ATTEMPT_ID`,
	"spine jobs complete":  `spine jobs complete JOB_ID --result '{"summary":"done"}' --lease-token LEASE_TOKEN --attempt-id ATTEMPT_ID`,
	"spine jobs fail": `spine jobs fail JOB_ID --message "upstream timed out" --code UPSTREAM_TIMEOUT
spine jobs fail JOB_ID --message "bad input" --retryable=false --requeue=false`,
	"spine jobs release": `spine jobs release JOB_ID --reason "shutting down"`,
	"spine jobs comment": `spine jobs comment JOB_ID "waiting for review"`,
	"spine jobs redrive": `spine jobs redrive JOB_ID`,

	"spine blobs put": `spine blobs put report.pdf
tar c notes | spine blobs put - --name notes.tar`,
	"spine blobs get": `spine blobs get BLOB_ID --out report.pdf`,

	"spine cluster status": `spine cluster status -o table
spine cluster status --addr http://127.0.0.1:36735`,
	"spine cluster join":            `spine cluster join --node-id n4 --raft-addr 127.0.0.1:36756 --http-addr http://127.0.0.1:36755 --gossip-addr 127.0.0.1:36757`,
	"spine cluster remove":          `spine cluster remove --node-id n4`,
	"spine cluster transfer-leader": "spine cluster transfer-leader -o table\nspine cluster transfer-leader --to n2",

	"spine snapshot save":    "spine snapshot save backup.snap\nspine snapshot save backup.snap --inspect -o table",
	"spine snapshot inspect": "spine snapshot inspect backup.snap",
	"spine snapshot restore": "spine snapshot restore backup.snap",

	"spine version": "spine version\nspine version --json",

	"spine mcp": `spine mcp --addr http://127.0.0.1:36725,http://127.0.0.1:36735 --token CLAW_TOKEN
spine mcp --role head --worker-id planner`,

	"spine setup": `spine setup
spine setup --yes --project-name api --script-dir scripts`,
	"spine run": `spine run
spine run --session api-v2 --nodes 1`,
	"spine stop": `spine stop
spine stop --stream auth`,
	"spine reload":         "spine reload --dry-run\nspine reload",
	"spine session create": `spine session create api-v2 --description "the v2 API"`,
	"spine session list":   "spine session list -o table",
	"spine session end":    "spine session end api-v2",
	"spine stream create": `spine stream create auth --session api-v2 --instructions "JWT per PRD 4.2. Done when tests pass."
spine stream create auth --session api-v2 --instructions-file auth.md`,
	"spine stream list": "spine stream list --session api-v2 -o table",
	"spine stream show": "spine stream show auth -o table",
	"spine stream end":  "spine stream end auth",
	"spine enqueue": `spine enqueue run-bash '{"script_path":"scripts/migrate.sh"}' --stream auth
spine enqueue run-tests --stream auth --timeout 600`,
	"spine tasks": `spine tasks --status running -o table
spine tasks --stale -o table`,
	"spine task":      "spine task TASK_ID -o table",
	"spine requeue":   "spine requeue TASK_ID",
	"spine peek":      "spine peek --stream auth --wait 10s",
	"spine claim":     "spine claim --stream auth --wait 30s",
	"spine complete":  `spine complete TASK_ID --result '{"summary":"migrated 12 users"}'`,
	"spine fail":      `spine fail TASK_ID --error "tests fail: 3 of 120"`,
	"spine heartbeat": "spine heartbeat TASK_ID",
	"spine purge":     "spine purge --older-than 3d",
	"spine status":    "spine status -o table",

	"spine gateway register":   "spine gateway register gw-1 --address http://10.0.0.7:7000 --capacity 8 --meta zone=eu-1",
	"spine gateway list":       "spine gateway list -o table",
	"spine gateway show":       "spine gateway show gw-1",
	"spine gateway deregister": "spine gateway deregister gw-1",
	"spine gateway heartbeat":  "spine gateway heartbeat gw-1",
	"spine worker register":    "spine worker register w-1 --gateway gw-1 --capability gpu --capacity 4",
	"spine worker list":        "spine worker list --gateway gw-1 -o table",
	"spine worker show":        "spine worker show w-1",
	"spine worker deregister":  "spine worker deregister w-1",
	"spine worker heartbeat":   "spine worker heartbeat w-1",
	"spine route":              "spine route JOB_ID --capability gpu --label zone=eu-1",
	"spine events": `spine events --from-oldest --kind job
spine events --job JOB_ID --limit 10`,
}

// addExamples sets the Example of every command of root's tree that has
// one in examples, indented as cobra prints it.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := examples[c.CommandPath()]; ok {
			c.Example = "  " + strings.ReplaceAll(ex, "\n", "\n  ")
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
