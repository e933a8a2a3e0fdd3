package review

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"sync"
)

// An approval that the broker proves (package proof) and that no other
// replay touched since the preview (the claims' summary) needs, of the
// previewed items, only the first Config.Tune.OwnAtApproval, which it owns; its
// runs decode the rest. At 1,000,000 items decoding them all took most of
// such an approval's time, so an approval loads the first ones with the
// header (Tokens.LoadFirst) and all of them only when a step needs them:
// a compare, the per-id reads of what other replays did, a take-over.

// previewItems is an approval's view of its preview's items: the first
// ones, loaded with the header, and all of them on first use.
type previewItems struct {
	s     *Service
	token string
	first []engine.Item
	whole bool // first is every item

	once sync.Once
	all  []engine.Item
	ids  []string
	err  error
}

// loadApprovalPreview loads token's preview for an approval: its header
// and at least its first n items (n < 0: all).
func (s *Service) loadApprovalPreview(ctx context.Context, token string, n int) (engine.Frozen, *previewItems, error) {
	f, err := s.d.Tokens.LoadFirst(ctx, token, n)
	if err != nil {
		return f, nil, err
	}
	return f, &previewItems{s: s, token: token, first: f.Items, whole: len(f.Items) >= f.Distinct}, nil
}

// load returns every previewed item, loading them once.
func (p *previewItems) load(ctx context.Context) ([]engine.Item, error) {
	p.once.Do(func() {
		p.all = p.first
		if !p.whole {
			f, err := p.s.d.Tokens.Load(ctx, p.token)
			if err != nil {
				p.err = fmt.Errorf("load the previewed items: %w", err)
				return
			}
			p.all = f.Items
		}
		p.ids = make([]string, len(p.all))
		for i, it := range p.all {
			p.ids[i] = it.ID
		}
	})
	return p.all, p.err
}

// loadIDs returns every previewed id, in DLQ order.
func (p *previewItems) loadIDs(ctx context.Context) ([]string, error) {
	_, err := p.load(ctx)
	return p.ids, err
}
