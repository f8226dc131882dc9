package tmux

import (
	"reflect"
	"strings"
	"testing"
)

// The block parser on transcripts of what tmux writes (the real client is
// exercised in control_test.go; these cover orders a given tmux build may
// or may not produce).
func TestBlockParser_Transcripts(t *testing.T) {
	transcript := strings.Join([]string{
		"%begin 1795567950 265 0", // the attach's own block
		"%end 1795567950 265 0",
		"%session-changed $0 keep",
		"%output %0 %end 1795567950 270 1", // pane output shaped like an end
		"%begin 1795567950 270 1",
		"%unlinked-window-add @1", // a notification inside (tmux next-3.8 builds)
		"22721",
		"%end 1795567950 271 1", // not this block's number: neither ends it nor is body
		"%end 1795567950 270 1",
		"%sessions-changed",
		"%begin 1795567950 272 1",
		"can't find session: nope",
		"%error 1795567950 272 1",
		"%begin 1795567950 273 0", // a hook's block: not a reply of ours
		"x",
		"%end 1795567950 273 0",
		"%begin 1795567950 274 1",
		"%foo\t1795567950\t33", // a session line that starts with % stays
		"soldier-1\t1795567950\t34",
		"%end 1795567950 274 1",
		"%exit",
	}, "\n")
	var p blockParser
	var got []ctlBlock
	for _, l := range strings.Split(transcript, "\n") {
		if b, ok := p.line(l); ok {
			got = append(got, b)
		}
	}
	want := []ctlBlock{
		{ours: false},
		{ours: true, body: []string{"22721"}},
		{ours: true, failed: true, body: []string{"can't find session: nope"}},
		{ours: false, body: []string{"x"}},
		{ours: true, body: []string{"%foo\t1795567950\t33", "soldier-1\t1795567950\t34"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("blocks:\n got %#v\nwant %#v", got, want)
	}
}

func TestCommandLine_QuotesEveryWord(t *testing.T) {
	got, ok := commandLine([]string{"new-session", "-e", "K=it's", ""})
	if !ok || got != `'new-session' '-e' 'K=it'\''s' ''`+"\n" {
		t.Fatalf("commandLine = %q, %v", got, ok)
	}
	for _, bad := range []string{"a\nb", "a\x00b"} {
		if _, ok := commandLine([]string{"has-session", "-t", bad}); ok {
			t.Errorf("word %q accepted on a command line", bad)
		}
	}
}
