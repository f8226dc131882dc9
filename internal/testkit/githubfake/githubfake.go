// Package githubfake is a fake GitHub REST API (and the Jira comment
// endpoints) for tests: the repository, pull request, review, comment and
// pull-request endpoints Kingdom's outputs call, kept in memory. A git push
// goes through a local bare repository the test makes; the fake lists its
// branches for the pull requests it opens.
//
// It also serves the notifications the sentinel polls (AddNotification),
// and can hold a write (HoldNext) so a test can kill the writer while its
// request is in flight: dropped before it lands, or landed and never
// answered.
//
//	f := githubfake.New("tok")        // writes need "Bearer tok"
//	defer f.Close()
//	f.AddRepo("acme/app", "main")
//	f.AddPull("acme/app", githubfake.Pull{Number: 7, Title: "Fix", Head: "feature", HeadSHA: sha, Base: "main"})
//	svc := outputs.Services{GitHubAPI: f.URL(), GitHubToken: "tok", JiraURL: f.URL(), JiraToken: "j"}
package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pull is a pull request of the fake.
type Pull struct {
	Number  int
	Title   string
	Body    string
	State   string // default open
	Draft   bool
	Author  string
	Head    string
	HeadSHA string
	Base    string
	Files   []File
	// ReviewComments are line comments already on the PR.
	ReviewComments []Comment
}

// File is a changed file.
type File struct {
	Filename  string `json:"filename"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

// Comment is a comment, review or line comment the fake holds.
type Comment struct {
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	User    struct {
		Login string `json:"login"`
	} `json:"user"`
	Path     string           `json:"path,omitempty"`
	Line     int              `json:"line,omitempty"`
	State    string           `json:"state,omitempty"`
	Comments []map[string]any `json:"-"` // a review's line comments as posted
	Auth     string           `json:"-"` // the Authorization it was posted with
}

// Request is one request the fake served.
type Request struct {
	Method, Path, Auth string
}

// Fake is the server.
type Fake struct {
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	nextID   int64
	repos    map[string]string // full name → default branch
	pulls    map[string]*Pull  // "owner/name#n"
	reviews  map[string][]Comment
	comments map[string][]Comment // issue comments, "owner/name#n"
	created  map[string][]Comment // pull requests opened, "owner/name"
	jira     map[string][]Comment // Jira issue key → comments
	requests []Request
	notes    []map[string]any // unread notifications
	marked   []string         // notification threads marked read
	holds    map[string][]*Hold
	allHolds []*Hold
	// LoseAnswers makes the next n writes happen but answer 502 (a reply
	// lost after the post).
	loseAnswers int
}

// New starts a fake whose writes need "Bearer <token>".
func New(token string) *Fake {
	f := &Fake{token: token, nextID: 100, repos: map[string]string{}, pulls: map[string]*Pull{},
		reviews: map[string][]Comment{}, comments: map[string][]Comment{}, created: map[string][]Comment{}, jira: map[string][]Comment{},
		holds: map[string][]*Hold{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{name}", f.repo)
	mux.HandleFunc("GET /repos/{owner}/{name}/pulls", f.listPulls)
	mux.HandleFunc("POST /repos/{owner}/{name}/pulls", f.createPull)
	mux.HandleFunc("GET /repos/{owner}/{name}/pulls/{n}", f.pull)
	mux.HandleFunc("GET /repos/{owner}/{name}/pulls/{n}/files", f.files)
	mux.HandleFunc("GET /repos/{owner}/{name}/pulls/{n}/comments", f.lineComments)
	mux.HandleFunc("GET /repos/{owner}/{name}/pulls/{n}/reviews", f.listReviews)
	mux.HandleFunc("POST /repos/{owner}/{name}/pulls/{n}/reviews", f.createReview)
	mux.HandleFunc("GET /repos/{owner}/{name}/issues/{n}/comments", f.listComments)
	mux.HandleFunc("POST /repos/{owner}/{name}/issues/{n}/comments", f.createComment)
	mux.HandleFunc("GET /notifications", f.notifications)
	mux.HandleFunc("PATCH /notifications/threads/{id}", f.markRead)
	mux.HandleFunc("GET /rest/api/3/issue/{key}/comment", f.jiraList)
	mux.HandleFunc("POST /rest/api/3/issue/{key}/comment", f.jiraAdd)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization")})
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	return f
}

// URL is the API base.
func (f *Fake) URL() string { return f.srv.URL }

// Close stops the server (releasing every hold first).
func (f *Fake) Close() {
	f.mu.Lock()
	all := f.allHolds
	f.mu.Unlock()
	for _, h := range all {
		h.Release()
	}
	f.srv.Close()
}

// AddRepo adds a repository.
func (f *Fake) AddRepo(repo, defaultBranch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[repo] = defaultBranch
}

// AddPull adds a pull request of repo.
func (f *Fake) AddPull(repo string, p Pull) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.State == "" {
		p.State = "open"
	}
	f.pulls[fmt.Sprintf("%s#%d", repo, p.Number)] = &p
}

// LoseAnswers makes the next n writes take effect but answer 502.
func (f *Fake) LoseAnswers(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseAnswers = n
}

// Reviews are the reviews posted on repo's PR n.
func (f *Fake) Reviews(repo string, n int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Comment(nil), f.reviews[fmt.Sprintf("%s#%d", repo, n)]...)
}

// Comments are the conversation comments on repo's issue or PR n.
func (f *Fake) Comments(repo string, n int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Comment(nil), f.comments[fmt.Sprintf("%s#%d", repo, n)]...)
}

// PullsOpened are the pull requests opened on repo through the API.
func (f *Fake) PullsOpened(repo string) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Comment(nil), f.created[repo]...)
}

// JiraComments are the comments posted on Jira issue key.
func (f *Fake) JiraComments(key string) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Comment(nil), f.jira[key]...)
}

// Requests are the requests served so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) { reply(w, 404, map[string]string{"message": "Not Found"}) }

func repoOf(r *http.Request) string { return r.PathValue("owner") + "/" + r.PathValue("name") }

func (f *Fake) pullOf(r *http.Request) (*Pull, string, bool) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	key := fmt.Sprintf("%s#%d", repoOf(r), n)
	p, ok := f.pulls[key]
	return p, key, ok
}

// write checks a write's token and whether its answer is to be lost;
// status 0 means go on.
func (f *Fake) write(w http.ResponseWriter, r *http.Request) (ok, lose bool) {
	if r.Header.Get("Authorization") != "Bearer "+f.token || f.token == "" {
		reply(w, 401, map[string]string{"message": "Bad credentials"})
		return false, false
	}
	if f.loseAnswers > 0 {
		f.loseAnswers--
		return true, true
	}
	return true, false
}

func (f *Fake) answer(w http.ResponseWriter, lose bool, v any) {
	if lose {
		reply(w, 502, map[string]string{"message": "Bad Gateway"})
		return
	}
	reply(w, 201, v)
}

func (f *Fake) repo(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	def, ok := f.repos[repoOf(r)]
	if !ok {
		notFound(w)
		return
	}
	reply(w, 200, map[string]any{"full_name": repoOf(r), "default_branch": def, "html_url": "https://github.example/" + repoOf(r)})
}

func pullJSON(repo string, p *Pull) map[string]any {
	return map[string]any{"number": p.Number, "title": p.Title, "body": p.Body, "state": p.State, "draft": p.Draft,
		"html_url": fmt.Sprintf("https://github.example/%s/pull/%d", repo, p.Number), "user": map[string]any{"login": p.Author},
		"head": map[string]any{"ref": p.Head, "sha": p.HeadSHA}, "base": map[string]any{"ref": p.Base}}
}

func (f *Fake) pull(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, _, ok := f.pullOf(r)
	if !ok {
		notFound(w)
		return
	}
	reply(w, 200, pullJSON(repoOf(r), p))
}

// page serves one page of a list (per_page, page).
func page[T any](r *http.Request, all []T) []T {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	pg, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if pg <= 0 {
		pg = 1
	}
	lo := min((pg-1)*per, len(all))
	return append([]T{}, all[lo:min(lo+per, len(all))]...)
}

func (f *Fake) files(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, _, ok := f.pullOf(r)
	if !ok {
		notFound(w)
		return
	}
	reply(w, 200, page(r, p.Files))
}

func (f *Fake) lineComments(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, _, ok := f.pullOf(r)
	if !ok {
		notFound(w)
		return
	}
	reply(w, 200, page(r, p.ReviewComments))
}

func (f *Fake) listReviews(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, key, ok := f.pullOf(r)
	if !ok {
		notFound(w)
		return
	}
	reply(w, 200, page(r, f.reviews[key]))
}

func (f *Fake) createReview(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	locked := true
	defer func() {
		if locked {
			f.mu.Unlock()
		}
	}()
	_, key, found := f.pullOf(r)
	ok, lose := f.write(w, r)
	if !ok {
		return
	}
	if !found {
		notFound(w)
		return
	}
	var in struct {
		Event    string           `json:"event"`
		Body     string           `json:"body"`
		Comments []map[string]any `json:"comments"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || (in.Event != "COMMENT" && in.Event != "REQUEST_CHANGES" && in.Event != "APPROVE") {
		reply(w, 422, map[string]string{"message": "Unprocessable Entity"})
		return
	}
	h := f.takeHold(HoldReview)
	if h != nil && h.Mode == HoldDrop {
		locked = false
		f.mu.Unlock()
		h.hold(w, r)
		return
	}
	f.nextID++
	c := Comment{ID: f.nextID, Body: in.Body, State: map[string]string{"COMMENT": "COMMENTED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "APPROVE": "APPROVED"}[in.Event],
		Comments: in.Comments, Auth: r.Header.Get("Authorization")}
	n := strings.TrimPrefix(key[strings.LastIndex(key, "#"):], "#")
	c.HTMLURL = fmt.Sprintf("https://github.example/%s/pull/%s#pullrequestreview-%d", repoOf(r), n, c.ID)
	f.reviews[key] = append(f.reviews[key], c)
	if h != nil {
		locked = false
		f.mu.Unlock()
		h.hold(w, r)
		return
	}
	f.answer(w, lose, c)
}

func (f *Fake) listComments(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _ := strconv.Atoi(r.PathValue("n"))
	reply(w, 200, page(r, f.comments[fmt.Sprintf("%s#%d", repoOf(r), n)]))
}

func (f *Fake) createComment(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, lose := f.write(w, r)
	if !ok {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		reply(w, 422, map[string]string{"message": "Unprocessable Entity"})
		return
	}
	h := f.takeHold(HoldComment)
	if h != nil && h.Mode == HoldDrop {
		f.mu.Unlock()
		h.hold(w, r)
		f.mu.Lock() // the deferred unlock's
		return
	}
	f.nextID++
	c := Comment{ID: f.nextID, Body: in.Body, Auth: r.Header.Get("Authorization"),
		HTMLURL: fmt.Sprintf("https://github.example/%s/issues/%d#issuecomment-%d", repoOf(r), n, f.nextID)}
	key := fmt.Sprintf("%s#%d", repoOf(r), n)
	f.comments[key] = append(f.comments[key], c)
	if h != nil {
		f.mu.Unlock()
		h.hold(w, r)
		f.mu.Lock()
		return
	}
	f.answer(w, lose, c)
}

func (f *Fake) listPulls(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	head := r.URL.Query().Get("head") // owner:branch
	var out []map[string]any
	for _, c := range f.created[repoOf(r)] {
		if head == "" || head == strings.Split(repoOf(r), "/")[0]+":"+c.Path {
			out = append(out, map[string]any{"html_url": c.HTMLURL, "title": c.State, "body": c.Body, "head": map[string]any{"ref": c.Path}})
		}
	}
	if out == nil {
		out = []map[string]any{}
	}
	reply(w, 200, out)
}

// createPull opens a pull request; Path holds its head branch and State
// its title in the record.
func (f *Fake) createPull(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, lose := f.write(w, r)
	if !ok {
		return
	}
	var in struct {
		Head, Base, Title, Body string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Head == "" || in.Base == "" || in.Title == "" {
		reply(w, 422, map[string]string{"message": "Validation Failed"})
		return
	}
	for _, c := range f.created[repoOf(r)] {
		if c.Path == in.Head {
			reply(w, 422, map[string]string{"message": "A pull request already exists for " + in.Head})
			return
		}
	}
	f.nextID++
	c := Comment{ID: f.nextID, Body: in.Body, State: in.Title, Path: in.Head, Auth: r.Header.Get("Authorization"),
		HTMLURL: fmt.Sprintf("https://github.example/%s/pull/%d", repoOf(r), f.nextID)}
	f.created[repoOf(r)] = append(f.created[repoOf(r)], c)
	f.answer(w, lose, map[string]any{"number": c.ID, "html_url": c.HTMLURL})
}

func (f *Fake) jiraList(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, c := range f.jira[r.PathValue("key")] {
		out = append(out, map[string]any{"id": strconv.FormatInt(c.ID, 10), "body": json.RawMessage(c.Body)})
	}
	reply(w, 200, map[string]any{"comments": out})
}

func (f *Fake) jiraAdd(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, _, ok := r.BasicAuth(); !ok {
		reply(w, 401, map[string]string{"message": "Unauthorized"})
		return
	}
	var in struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Body) == 0 {
		reply(w, 400, map[string]string{"message": "Bad Request"})
		return
	}
	lose := false
	if f.loseAnswers > 0 {
		f.loseAnswers--
		lose = true
	}
	f.nextID++
	key := r.PathValue("key")
	f.jira[key] = append(f.jira[key], Comment{ID: f.nextID, Body: string(in.Body)})
	if lose {
		reply(w, 502, map[string]string{"message": "Bad Gateway"})
		return
	}
	reply(w, 201, map[string]any{"id": strconv.FormatInt(f.nextID, 10)})
}

// A Hold keeps one write in flight until the test releases it (or the
// writer goes away), then drops its connection unanswered: the writer
// never learns what became of it.
type Hold struct {
	Mode HoldMode
	// Arrived is closed when the write has arrived and is held (after it
	// was recorded, for HoldLanded).
	Arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

// HoldMode says whether a held write lands.
type HoldMode int

const (
	// HoldDrop never records the write: a writer killed while it is held
	// was killed before its write landed.
	HoldDrop HoldMode = iota
	// HoldLanded records the write, then holds it unanswered: a writer
	// killed while it is held was killed after its write landed.
	HoldLanded
)

// The writes a Hold can take.
const (
	HoldReview  = "review"  // POST /repos/{o}/{n}/pulls/{n}/reviews
	HoldComment = "comment" // POST /repos/{o}/{n}/issues/{n}/comments
)

// HoldNext holds the next write of kind (HoldReview, HoldComment); later
// writes of the kind are served as usual.
func (f *Fake) HoldNext(kind string, mode HoldMode) *Hold {
	h := &Hold{Mode: mode, Arrived: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	f.holds[kind] = append(f.holds[kind], h)
	f.allHolds = append(f.allHolds, h)
	f.mu.Unlock()
	return h
}

// Release lets the held write go: its connection is dropped, unanswered.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// takeHold pops the first hold of kind (f.mu held).
func (f *Fake) takeHold(kind string) *Hold {
	hs := f.holds[kind]
	if len(hs) == 0 {
		return nil
	}
	f.holds[kind] = hs[1:]
	return hs[0]
}

// hold signals the arrival, waits for the release (or the writer's end,
// or the server's), and drops the connection without an answer.
func (h *Hold) hold(w http.ResponseWriter, r *http.Request) {
	close(h.Arrived)
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // the server drops the connection
}

// AddNotification adds an unread notification of the authenticated user:
// reason (review_requested, mention, assign) on repo's pull request pr.
func (f *Fake) AddNotification(id, repo string, pr int, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, map[string]any{
		"id": id, "unread": true, "reason": reason, "updated_at": time.Now().UTC().Format(time.RFC3339),
		"subject": map[string]any{"title": fmt.Sprintf("PR %d", pr), "type": "PullRequest",
			"url": fmt.Sprintf("%s/repos/%s/pulls/%d", f.srv.URL, repo, pr)},
		"repository": map[string]any{"full_name": repo, "html_url": "https://github.example/" + repo},
		"url":        fmt.Sprintf("%s/notifications/threads/%s", f.srv.URL, id),
	})
}

// MarkedRead are the notification threads marked read so far.
func (f *Fake) MarkedRead() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.marked...)
}

func (f *Fake) notifications(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+f.token || f.token == "" {
		reply(w, 401, map[string]string{"message": "Bad credentials"})
		return
	}
	w.Header().Set("X-Poll-Interval", "1")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	out := append([]map[string]any{}, f.notes...)
	reply(w, 200, out)
}

func (f *Fake) markRead(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := r.PathValue("id")
	f.marked = append(f.marked, id)
	keep := f.notes[:0]
	for _, n := range f.notes {
		if n["id"] != id {
			keep = append(keep, n)
		}
	}
	f.notes = keep
	w.WriteHeader(http.StatusResetContent)
}
