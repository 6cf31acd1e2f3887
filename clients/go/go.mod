module agentd.dev/client

go 1.19
