"""FermiNet's (TensorFlow 1 version) determinant ops with gradients that stay defined for
singular matrices, computed from an SVD: sign of the determinant with a zero gradient, the
determinant, the log-determinant (two outputs), and `logdet_matmul`, whose gradient is itself a
custom gradient giving the exact second derivative (nested custom gradients, `compat.v1`).

Source: google-deepmind/ferminet, ferminet/networks.py at the TensorFlow version (Apache-2.0):
`extend`, `sign_det`, `determinant`, `log_determinant`, `cofactor`, `gamma`, `rho`,
`grad_cofactor`, `logdet_matmul`; the Sonnet networks and the hamiltonian import left out.
"""

import tensorflow.compat.v1 as tf


def extend(x, y):
    """Add extra dimensions so x can be broadcast with y."""
    if isinstance(x, float):
        return x
    rank = y.shape.rank
    rank_ = x.shape.rank
    assert rank_ <= rank
    for _ in range(rank - rank_):
        x = tf.expand_dims(x, -1)
    return x


@tf.custom_gradient
def sign_det(x):
    """Sign of determinant op whose gradient doesn't crash when the sign is 0."""
    with tf.name_scope("sign_det"):
        sign = tf.linalg.slogdet(x)[0]

        def grad(_):
            return tf.zeros_like(x)

    return sign, grad


@tf.custom_gradient
def determinant(x):
    """Determinant op with well-defined gradient for singular matrices."""
    with tf.name_scope("determinant"):
        with tf.device("/cpu:0"):
            s, u, v = tf.linalg.svd(x)

        sign = sign_det(x)

        def grad(dx):
            ss = tf.tile(s[..., None], len(s.shape) * [1] + [s.shape[-1]])
            ss = tf.linalg.set_diag(ss, tf.ones_like(s))
            z = tf.reduce_prod(ss, axis=-2)
            adj = tf.matmul(u, tf.matmul(tf.linalg.diag(z), v, transpose_b=True))
            signdx = tf.expand_dims(tf.expand_dims(sign * dx, -1), -1)
            return signdx * adj

        return sign * tf.reduce_prod(s, axis=-1), grad


@tf.custom_gradient
def log_determinant(x):
    """Log-determinant op with well-defined gradient for singular matrices."""
    with tf.name_scope("determinant"):
        with tf.device("/cpu:0"):
            s, u, v = tf.linalg.svd(x)

        sign = sign_det(x)

        def grad(dsign, dlog):
            del dsign
            # d ln|det(X)|/dX = transpose(X^{-1}). This uses pseudo-inverse via SVD
            # and so is not numerically stable...
            adj = tf.matmul(u, tf.matmul(tf.linalg.diag(1.0 / s), v, transpose_b=True))
            return tf.expand_dims(tf.expand_dims(dlog, -1), -1) * adj

        return (sign, tf.reduce_sum(tf.log(s), axis=-1)), grad


def cofactor(u, s, v, shift=0.0):
    r"""Calculates the cofactor matrix from singular value decomposition."""
    return tf.matmul(u, tf.matmul(tf.linalg.diag(gamma(s, shift)), v, transpose_b=True))


def gamma(s, shift=0.0):
    r"""Calculates diagonal of \Gamma_{ij} = \delta_{ij} \Prod_{k!=i} s_k."""
    ls = tf.log(s)
    lower = tf.cumsum(ls, axis=-1, exclusive=True)
    upper = tf.cumsum(ls, axis=-1, exclusive=True, reverse=True)
    return tf.exp(lower + upper - shift)


def rho(s, shift=0.0):
    r"""Calculates \rho_ij = \prod_{k!=i,j} s_k, \rho_ii = 0."""
    # Product of singular elements before and after two indices, i, j,
    # i.e. v_{ij} = \Prod_{k<i,l>j} s_i s_j -- outer product of forward and
    # reverse cumulative products. Valid only for j>i.
    # Computed in log domain for numerical stability.
    ls = tf.log(s)
    lower_cumsum = tf.cumsum(ls, axis=-1, exclusive=True)
    upper_cumsum = tf.cumsum(ls, axis=-1, reverse=True, exclusive=True)
    v = tf.expand_dims(lower_cumsum, -1) + tf.expand_dims(upper_cumsum, -2)

    # Product of singular elements between two indices, \Prod_{i<k<l} s_k.
    # Create matrix with strict upper diagonal set to s_k and ones elsewhere and
    # take cumulative product.
    # Also computed in log domain for numerical stability
    s_mat = tf.linalg.transpose(tf.tile(ls[..., None], [1] * len(s.shape) + [s.shape[-1]]))
    triu_s_mat = tf.linalg.set_diag(tf.matrix_band_part(s_mat, 0, -1), tf.zeros_like(s))
    z = tf.cumsum(triu_s_mat, exclusive=True, axis=-1)
    # Discard lower triangle.
    r = tf.exp(z + v - extend(shift, z))
    r = tf.matrix_band_part(r, 0, -1)
    r = tf.linalg.set_diag(r, tf.zeros_like(s))

    return r + tf.linalg.transpose(r)


def grad_cofactor(u, v, r, grad_dy):
    r"""Calculate the first derivative of the cofactor of a matrix M."""
    with tf.name_scope("grad_cofactor"):
        k = tf.matmul(v, tf.matmul(grad_dy, u, transpose_a=True), transpose_a=True)
        # r_ii = 0 for convenience. Calculate off-diagonal terms.
        kr = -tf.multiply(k, r)
        # NB: r is symmetric and r_ii = 0.
        kr_diag = tf.matmul(r, tf.expand_dims(tf.linalg.diag_part(k), -1))
        kr = tf.linalg.set_diag(kr, tf.squeeze(kr_diag))
        return tf.matmul(u, tf.matmul(kr, v, transpose_b=True))


@tf.custom_gradient
def logdet_matmul(x1, x2, w):
    """Numerically stable implementation of log(abs(sum_i w_i |x1_i| * |x2_i|))."""
    if x1.shape[:-2] != x2.shape[:-2]:
        raise ValueError("x1 and x2 must have the same number of determinants.")
    if w.shape[0] != x1.shape[-3]:
        raise ValueError("Number of determinants should equal number of inputs to weights.")
    with tf.name_scope("logdet_matmul"):
        with tf.device("/cpu:0"):
            if x1.shape[-1] > 1:
                s1, u1, v1 = tf.linalg.svd(x1)
            if x2.shape[-1] > 1:
                s2, u2, v2 = tf.linalg.svd(x2)

        # Computing the sign of the determinant u and v instead of x means this
        # works even with singular matrices.
        if x1.shape[-1] > 1:
            sign1 = sign_det(u1) * sign_det(v1)
            logdet1 = tf.reduce_sum(tf.log(s1), axis=-1)
        else:
            sign1 = tf.sign(x1[..., 0, 0])
            logdet1 = tf.log(tf.abs(x1[..., 0, 0]))

        if x2.shape[-1] > 1:
            sign2 = sign_det(u2) * sign_det(v2)
            logdet2 = tf.reduce_sum(tf.log(s2), axis=-1)
        else:
            sign2 = tf.sign(x2[..., 0, 0])
            logdet2 = tf.log(tf.abs(x2[..., 0, 0]))

        sign = sign1 * sign2
        logdet = logdet1 + logdet2

        logdet_max1 = tf.reduce_max(logdet1, axis=-1, keepdims=True)
        logdet_max2 = tf.reduce_max(logdet2, axis=-1, keepdims=True)
        det = tf.exp(logdet - logdet_max1 - logdet_max2) * sign
        output = tf.matmul(det, w)
        sign_out = tf.sign(output)
        log_out = tf.log(tf.abs(output)) + logdet_max1 + logdet_max2

        @tf.custom_gradient
        def logdet_matmul_grad(x1, x2, w, grad_log):
            """Numerically stable gradient of log(abs(sum_i w_i |x1_i| * |x2_i|))."""
            # This is missing a factor of exp(-logdet_max1-logdet_max2), which is
            # instead picked up by including it in the terms adj1*det2 and adj2*det1
            glog_out = grad_log / output
            dout = tf.matmul(glog_out, w, transpose_b=True)

            if x1.shape[-1] > 1:
                adj1 = cofactor(u1, s1, v1, extend(logdet_max1, s1)) * sign1[..., None, None]
            else:
                adj1 = tf.ones_like(x1) * extend(tf.exp(-logdet_max1), x1)

            if x2.shape[-1] > 1:
                adj2 = cofactor(u2, s2, v2, extend(logdet_max2, s2)) * sign2[..., None, None]
            else:
                adj2 = tf.ones_like(x2) * extend(tf.exp(-logdet_max2), x2)

            det1 = tf.exp(logdet1 - logdet_max1) * sign1
            det2 = tf.exp(logdet2 - logdet_max2) * sign2

            dx1 = adj1 * (det2 * dout)[..., None, None]
            dx2 = adj2 * (det1 * dout)[..., None, None]
            dw = tf.matmul(det, glog_out, transpose_a=True)

            def grad(grad_dx1, grad_dx2, grad_dw):
                """Stable gradient of gradient of log(abs(sum_i w_i |x1_i| * |x2_i|))."""
                # Terms that appear repeatedly in different gradients.
                det_grad_dw = tf.matmul(det, grad_dw)
                # Missing a factor of exp(-2logdet_max1-2logdet_max2) which is included\
                # via terms involving r1, r2, det1, det2, adj1, adj2
                glog_out2 = grad_log / (output**2)

                adj_dx1 = tf.reduce_sum(adj1 * grad_dx1, axis=[-1, -2])
                adj_dx2 = tf.reduce_sum(adj2 * grad_dx2, axis=[-1, -2])

                adj_dx1_det2 = det2 * adj_dx1
                adj_dx2_det1 = det1 * adj_dx2
                adj_dx = adj_dx2_det1 + adj_dx1_det2

                if x1.shape[-1] > 1:
                    r1 = rho(s1, logdet_max1)
                    dadj1 = grad_cofactor(u1, v1, r1, grad_dx1) * sign1[..., None, None]
                else:
                    dadj1 = tf.zeros_like(x1)

                if x2.shape[-1] > 1:
                    r2 = rho(s2, logdet_max2)
                    dadj2 = grad_cofactor(u2, v2, r2, grad_dx2) * sign2[..., None, None]
                else:
                    dadj2 = tf.zeros_like(x2)

                # Computes gradients wrt x1 and x2.
                ddout_w = tf.matmul(glog_out, grad_dw, transpose_b=True) - tf.matmul(
                    glog_out2 * det_grad_dw, w, transpose_b=True
                )
                ddout_x = tf.matmul(glog_out2 * tf.matmul(adj_dx, w), w, transpose_b=True)

                grad_x1 = (
                    adj1 * (det2 * (ddout_w - ddout_x) + adj_dx2 * dout)[..., None, None]
                    + dadj1 * (dout * det2)[..., None, None]
                )
                grad_x2 = (
                    adj2 * (det1 * (ddout_w - ddout_x) + adj_dx1 * dout)[..., None, None]
                    + dadj2 * (dout * det1)[..., None, None]
                )

                adj_dx_w = tf.matmul(adj_dx, w)

                # Computes gradient wrt w.
                grad_w = tf.matmul(adj_dx, glog_out, transpose_a=True) - tf.matmul(
                    det, glog_out2 * (det_grad_dw + adj_dx_w), transpose_a=True
                )

                # Computes gradient wrt grad_log.
                grad_grad_log = (det_grad_dw + adj_dx_w) / output
                return grad_x1, grad_x2, grad_w, grad_grad_log

            return (dx1, dx2, dw), grad

        def grad(grad_log, grad_sign):
            """Computes gradient wrt log(w*det(x1)*det(x2))."""
            del grad_sign
            return logdet_matmul_grad(x1, x2, w, grad_log)

        return (log_out, sign_out), grad


X = [
    [[2.0, 0.5, -0.3], [0.1, 1.5, 0.4], [-0.7, 0.2, 1.1]],
    [[0.3, -1.2, 0.8], [1.4, 0.6, -0.5], [0.2, 0.9, 2.0]],
]

EXAMPLES = {
    "determinant": (X,),
    "log_determinant": (X,),
    "logdet_matmul": (  # [batch 2, 2 determinants, 2, 2] twice, then [2 in, 3 out]
        [[[[2.0, 0.5], [0.1, 1.5]], [[-0.7, 0.2], [1.1, 0.3]]],
         [[[0.9, -0.6], [0.4, 1.2]], [[1.3, 0.2], [-0.5, 0.8]]]],
        [[[[1.2, -0.4], [0.6, 0.9]], [[0.5, 1.3], [-0.8, 0.7]]],
         [[[0.7, 0.1], [-0.3, 1.6]], [[2.1, -0.9], [0.4, 0.6]]]],
        [[0.5, -1.0, 0.25], [1.5, 0.75, -0.5]],
    ),
}
