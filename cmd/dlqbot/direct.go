package main

import (
	"os"
	"os/user"
	"strconv"
)

// Direct mode is the operator's: the terminal, `dlqbot audit` and
// `dlqbot mcp` without DLQBOT_SERVER open RabbitMQ and Redis themselves,
// with the credentials and the signing key in their own environment.
// Everyone else is a client of the server (DLQBOT_SERVER, DLQBOT_TOKEN),
// which holds those and enforces the policy.

// checkDirect refuses direct mode unless the operator chose it: a
// permissions file (DLQBOT_PERMISSIONS), whose records are then signed —
// a process that cannot sign refuses to start — or DLQBOT_ACCESS=open
// (access control off). what names the command ("dlqbot preview").
func checkDirect(cfg config, what string) error {
	if cfg.PermissionsFile == "" && !cfg.AccessOpen {
		return usageError("%s acts on RabbitMQ and Redis directly only in the operator's mode: set DLQBOT_SERVER (the dlqbot server's URL) and DLQBOT_TOKEN (your personal token) to act through the server, or, holding the broker's and Redis's credentials, DLQBOT_PERMISSIONS or DLQBOT_ACCESS=open (access control off)", what)
	}
	if cfg.PermissionsFile != "" {
		key, err := signingKey(cfg)
		if err != nil {
			return err
		}
		if key == nil {
			return usageError("%s with a permissions file (DLQBOT_PERMISSIONS) needs the signing key the server uses: set DLQBOT_SIGNING_KEY (or DLQBOT_SIGNING_KEY_FILE); unsigned records would be refused by every other dlqbot", what)
		}
	}
	return nil
}

// osUser is the OS account this process runs as, by its uid (never
// $USER, which anyone can set): the identity of the operator's direct
// terminal and `dlqbot mcp`. A uid with no name (a container's arbitrary
// uid) is refused.
func osUser() (string, error) {
	return uidName(os.Getuid(), user.LookupId)
}

func uidName(uid int, lookup func(string) (*user.User, error)) (string, error) {
	u, err := lookup(strconv.Itoa(uid))
	if err != nil || u.Username == "" {
		return "", usageError("this process's uid %d has no user name (no passwd entry), so it cannot say who acts: run as a named OS user, or act through the dlqbot server (DLQBOT_SERVER, DLQBOT_TOKEN)", uid)
	}
	return u.Username, nil
}

// currentUser is osUser's name, "" when the uid has none.
func currentUser() string {
	name, _ := osUser()
	return name
}
