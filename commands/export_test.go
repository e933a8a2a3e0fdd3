package commands

// Help is HelpAs for the /dlq slash command, as the tests call it.
func Help(command string, accessControl bool) string {
	return HelpAs(DefaultPrefix, command, accessControl)
}
