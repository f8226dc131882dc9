package general

import "sort"

// Wait blocks until every task goroutine has returned.
func (g *General) Wait() { g.wg.Wait() }

// Active returns the ids of the tasks being worked on.
func (g *General) Active() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.active))
	for id := range g.active {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
