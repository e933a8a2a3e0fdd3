// Package doccheck holds one test: that every package's doc.go names
// each of its production files (every .go file but doc.go and the
// test files), and names no Go file of its directory that does not
// exist, so that a package's doc.go stays the map of its files.
package doccheck
