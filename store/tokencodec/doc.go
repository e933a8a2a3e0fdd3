// Package tokencodec encodes a frozen preview (engine.Frozen) as the byte
// string the store keeps under a preview token, and decodes it back: the
// binary, chunked token format, whole, its first items only, column by
// column (engine.ItemColumns) or its header alone, and the JSON or gzip
// JSON format of earlier releases, which is still read. It knows nothing
// of Redis or of signatures: package store wraps an encoding in its MACs
// and keeps it under its key.
//
// Files:
//
//	encode.go   the binary format, byte by byte, and Encode
//	decode.go   Decode, DecodeFirst, DecodeColumns, DecodeHeader and
//	            HeadLen
//	legacy.go   the JSON/gzip format of earlier releases (IsLegacy)
package tokencodec
