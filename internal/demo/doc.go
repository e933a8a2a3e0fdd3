// Package demo holds what `dlqbot demo` shows a newcomer, shared by the
// command and its browser test: the demo's queues and traffic (a DLQ fed
// by two services, one fixed and one still failing) and the workspace the
// Slack stand-in's page presents (channels, user, hints).
//
// Files:
//
//	demo.go     the demo workspace's channels, user and hints
//	traffic.go  the demo's queues and the traffic that feeds its DLQ
package demo
