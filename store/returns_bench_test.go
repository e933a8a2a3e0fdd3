package store

import (
	"strconv"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// BenchmarkReturnsRecord is one drained batch of a tap as the workers
// record it: 100 messages, of which 20 are returns of one replay, on a
// signing store (the floors are written) and on one without a key.
func BenchmarkReturnsRecord(b *testing.B) {
	for _, c := range []struct {
		name string
		key  []byte
	}{{"signed", testKey}, {"unsigned", nil}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, func(cfg *Config) { cfg.SigningKey = c.key })
			rs := e.st.Returns()
			if err := rs.Begin(e.ctx, "r_bench", "q.dlq"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch := make([]engine.ReturnEvent, 20)
				for j := range batch {
					batch[j] = engine.ReturnEvent{ReplayID: "r_bench", ID: "m" + strconv.Itoa(i*20+j), Group: "rejected", ReplayCount: 1, At: e.clock.Now()}
				}
				if err := rs.Record(e.ctx, "q.dlq", batch, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
