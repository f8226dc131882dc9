package lockfile

// WithShared runs fn holding the shared lock at path (opened for this call
// only): readers of a file whose writers hold the exclusive lock.
func WithShared(path string, fn func() error) error {
	return with(path, (*File).RLock, fn)
}
