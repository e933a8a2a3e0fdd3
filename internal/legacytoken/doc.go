// Package legacytoken writes preview tokens in the format dlqbot stored
// before the binary token format (store/tokencodec/encode.go): the frozen
// preview as JSON, gzip-compressed when larger than 4 KiB. Consumed tokens
// are kept 30 days, so the store still reads this format; tests use this
// encoder, the one dlqbot used to run, to write such tokens.
//
// It is imported by tests only (the store's and the engine's); no
// production package may import it.
//
// Files:
//
//	legacytoken.go  Encode, the legacy JSON or gzip JSON format
package legacytoken
