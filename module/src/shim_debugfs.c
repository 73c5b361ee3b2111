// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: debugfs files whose file operations pin the module.
 * Stays C: static file_operations tables with .owner = THIS_MODULE, which
 * the 7.3 crate's debugfs lacks, on the seq_file single_open() helpers.
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "shim.h"

/* --- debugfs files that pin the module ------------------------------------ */

/*
 * The Rust debugfs file operations of 7.3 carry no owner, so an open
 * debugfs file does not pin the module, and closing it after rmmod runs
 * full_proxy_release() on file operations that are gone. These do: the
 * debugfs proxy takes a reference on fops->owner for every open file
 * (fops_get() in full_proxy_open_regular()), so rmmod is refused while one
 * is open. The show/store callbacks are Rust's (module/src/debugfs.rs).
 */
/* In C: a seq_file show callback of the C file_operations below. */
static int tk_dbg_show(struct seq_file *m, void *v)
{
	const struct tk_dbg_attr *a = m->private;

	return a->show(a->ctx, m);
}

/* In C: single_open() for the C file_operations, which carry .owner (the 7.3 debugfs files do not). */
static int tk_dbg_open(struct inode *inode, struct file *file)
{
	int ret = single_open(file, tk_dbg_show, inode->i_private);

	/*
	 * seq_open() clears FMODE_PWRITE; the sysfs files tierkit mirrors
	 * accept pwrite(2) at any offset (kernfs_fop_open() restores it).
	 */
	if (!ret && (file->f_mode & FMODE_WRITE))
		file->f_mode |= FMODE_PWRITE;
	return ret;
}

/* A write is taken whole, at most a page, NUL-terminated (as sysfs). */
/* In C: the write callback of the C file_operations below. */
static ssize_t tk_dbg_write(struct file *file, const char __user *ubuf,
			    size_t len, loff_t *ppos)
{
	const struct tk_dbg_attr *a = file_inode(file)->i_private;
	char *buf;
	int ret;

	/* As sysfs_kf_write(): an empty write does nothing and returns 0. */
	if (!len)
		return 0;
	if (len > PAGE_SIZE)
		return -EINVAL;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = a->store(a->ctx, buf, len);
	kfree(buf);
	return ret < 0 ? ret : len;
}

static const struct file_operations tk_dbg_ro_fops = {
	.owner = THIS_MODULE,
	.open = tk_dbg_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

static const struct file_operations tk_dbg_rw_fops = {
	.owner = THIS_MODULE,
	.open = tk_dbg_open,
	.read = seq_read,
	.write = tk_dbg_write,
	.llseek = seq_lseek,
	.release = single_release,
};

/* In C: debugfs_create_dir() for the files below, whose file_operations must stay C. */
struct dentry *tk_debugfs_dir(const char *name, struct dentry *parent)
{
	return debugfs_create_dir(name, parent);
}

/* Read-only when @attr has no store callback. */
/* In C: debugfs_create_file() with file_operations that pin the module (.owner), which kernel::debugfs lacks. */
struct dentry *tk_debugfs_file(const char *name, umode_t mode,
			       struct dentry *parent, struct tk_dbg_attr *attr)
{
	return debugfs_create_file(name, mode, parent, attr,
				   attr->store ? &tk_dbg_rw_fops : &tk_dbg_ro_fops);
}

/* debugfs_remove(): recursive; waits for callbacks in flight. */
/* In C: debugfs_remove() of the dentries made here. */
void tk_debugfs_remove(struct dentry *d)
{
	debugfs_remove(d);
}
