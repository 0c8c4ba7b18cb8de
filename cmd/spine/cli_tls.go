package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spine-queue/spine/internal/devca"
)

// tlsCommand is spine tls: a development CA and node certificates for the
// nodes' mutual TLS (spine serve --tls-ca/--tls-cert/--tls-key).
func tlsCommand(env *cliEnv) *cobra.Command {
	root := &cobra.Command{
		Use:     "tls <command>",
		Short:   "Make a development CA and node certificates for mutual TLS between nodes",
		GroupID: "server",
		Long: `Make a development CA and node certificates for mutual TLS between nodes.

"spine tls ca create" writes a CA (ECDSA P-256, self-signed, 5 years): ca.pem and
ca-key.pem (0600). "spine tls cert create" writes a node certificate signed by it,
valid for server and client authentication, with the addresses the node is
reached at as subject alternative names: <node-id>.pem and <node-id>-key.pem (0600).
Start each node with --tls-ca ca.pem --tls-cert <id>.pem --tls-key <id>-key.pem
(docs/operations.md, Security). Keep ca-key.pem off the nodes.`,
		Example: `  spine tls ca create --out certs
  spine tls cert create --ca certs --node-id n1 --ip 127.0.0.1 --out certs
  spine tls cert create --ca certs --node-id n2 --ip 10.0.0.2 --dns n2.spine.internal --out certs`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{cmd, "tls: missing command (ca create, cert create)"}
		},
	}

	ca := &cobra.Command{Use: "ca <command>", Short: "Make a development CA", Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{cmd, "tls ca: missing command (create)"}
		}}
	var caOut, caName string
	caCreate := &cobra.Command{
		Use: "create", Short: "Write a new CA: ca.pem and ca-key.pem (0600) in --out",
		Example: "  spine tls ca create --out certs",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if caOut == "" {
				return &usageError{cmd, "--out is required"}
			}
			cert, key, err := devca.CreateCA(caOut, caName)
			if err != nil {
				fmt.Fprintf(env.stderr, "spine tls ca create: %v\n", err)
				return exitCodeError(exitError)
			}
			fmt.Fprintf(env.stdout, "CA certificate %s\nCA key         %s (keep it off the nodes)\n", cert, key)
			return nil
		},
	}
	caCreate.Flags().StringVar(&caOut, "out", "", "directory to write ca.pem and ca-key.pem into (created if missing)")
	caCreate.Flags().StringVar(&caName, "name", "Spine dev CA", "the CA's common name")
	ca.AddCommand(caCreate)

	cert := &cobra.Command{Use: "cert <command>", Short: "Make node certificates", Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{cmd, "tls cert: missing command (create)"}
		}}
	var caDir, nodeID, certOut string
	var ips, dns []string
	certCreate := &cobra.Command{
		Use:   "create",
		Short: "Write a node certificate signed by the CA: <node-id>.pem and <node-id>-key.pem (0600) in --out",
		Example: `  spine tls cert create --ca certs --node-id n1 --ip 127.0.0.1 --out certs
  spine tls cert create --ca certs --node-id n2 --ip 10.0.0.2 --dns n2.spine.internal --out certs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if caDir == "" || nodeID == "" || certOut == "" {
				return &usageError{cmd, "--ca, --node-id and --out are required"}
			}
			if len(ips) == 0 && len(dns) == 0 {
				return &usageError{cmd, "give at least one --ip or --dns: the addresses other nodes and clients reach this node at"}
			}
			req := devca.CertRequest{CADir: caDir, NodeID: nodeID, OutDir: certOut}
			for _, s := range ips {
				ip := net.ParseIP(strings.TrimSpace(s))
				if ip == nil {
					return &usageError{cmd, fmt.Sprintf("--ip %q is not an IP address", s)}
				}
				req.IPs = append(req.IPs, ip)
			}
			for _, d := range dns {
				if d = strings.TrimSpace(d); d != "" {
					req.DNSNames = append(req.DNSNames, d)
				}
			}
			c, k, err := devca.CreateCert(req)
			if err != nil {
				fmt.Fprintf(env.stderr, "spine tls cert create: %v\n", err)
				return exitCodeError(exitError)
			}
			fmt.Fprintf(env.stdout, "certificate %s\nkey         %s\n", c, k)
			return nil
		},
	}
	certCreate.Flags().StringVar(&caDir, "ca", "", "directory holding ca.pem and ca-key.pem (spine tls ca create)")
	certCreate.Flags().StringVar(&nodeID, "node-id", "", "the node's id: the certificate's common name and its files' name")
	certCreate.Flags().StringSliceVar(&ips, "ip", nil, "IP address the node is reached at (repeatable or comma-separated)")
	certCreate.Flags().StringSliceVar(&dns, "dns", nil, "DNS name the node is reached at (repeatable or comma-separated)")
	certCreate.Flags().StringVar(&certOut, "out", "", "directory to write the certificate and key into (created if missing)")
	cert.AddCommand(certCreate)

	root.AddCommand(ca, cert)
	return root
}
