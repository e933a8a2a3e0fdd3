// Package doccheck holds the tests that keep the tree's map true: every
// package's doc.go names each of its production files (every Go file but
// doc.go and the test files) and no Go file of its directory that does
// not exist (doccheck_test.go), and the imports run one way, front ends →
// ops → engine ← store, engine/amqp, with no production package importing
// a test helper and engine/letter importing the standard library only
// (layers_test.go); the README's glossary table is commands.Glossary's
// terms and no docs/*.md keeps a second copy (glossary_test.go). It has
// no production code.
package doccheck
