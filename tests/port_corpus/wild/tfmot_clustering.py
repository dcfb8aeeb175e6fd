"""Weight clustering in the TensorFlow Model Optimization Toolkit: the nearest centroid of each
weight is gathered; the centroids' gradient is averaged over each cluster's size, and the
original weights get the clustered weights' gradient straight through (two custom gradients
defined in a method, over a tf.Variable of centroids).

Source: tensorflow/model-optimization,
tensorflow_model_optimization/python/core/clustering/keras/clustering_algorithm.py (Apache-2.0);
`GradientAggregation` (cluster_config.py) reduced to its two values, the abstract base class
metaclass left out.
"""

import tensorflow as tf


class GradientAggregation:
    SUM = "SUM"
    AVG = "AVG"


class ClusteringAlgorithm(object):
    def __init__(self, clusters_centroids, cluster_gradient_aggregation=GradientAggregation.SUM):
        if not isinstance(clusters_centroids, tf.Variable):
            raise ValueError("clusters_centroids should be a tf.Variable.")

        self.cluster_centroids = clusters_centroids
        self.cluster_gradient_aggregation = cluster_gradient_aggregation

    def get_pulling_indices(self, weight):
        pulling_indices = tf.argmin(
            tf.abs(tf.expand_dims(weight, axis=-1) - self.cluster_centroids), axis=-1
        )

        return pulling_indices

    def get_clustered_weight(self, pulling_indices, original_weight):
        @tf.custom_gradient
        def average_centroids_gradient_by_cluster_size(cluster_centroids, cluster_sizes):
            def grad(d_cluster_centroids):
                # Average the gradient based on the number of weights belonging to each cluster
                d_cluster_centroids = tf.math.divide_no_nan(d_cluster_centroids, cluster_sizes)
                return d_cluster_centroids, None

            return cluster_centroids, grad

        @tf.custom_gradient
        def add_gradient_to_original_weight(clustered_weight, original_weight):
            override_weights = tf.sign(original_weight + 1e6)
            override_clustered_weight = clustered_weight * override_weights

            def grad(d_override_clustered_weight):
                return d_override_clustered_weight, d_override_clustered_weight

            return override_clustered_weight, grad

        if self.cluster_gradient_aggregation == GradientAggregation.SUM:
            cluster_centroids = self.cluster_centroids
        elif self.cluster_gradient_aggregation == GradientAggregation.AVG:
            # Compute the size of each cluster (number of weights belonging to each cluster)
            cluster_sizes = tf.math.bincount(
                arr=tf.cast(pulling_indices, dtype=tf.int32),
                minlength=tf.size(self.cluster_centroids),
                dtype=self.cluster_centroids.dtype,
            )
            # Modify the gradient of cluster_centroids to be averaged by cluster sizes
            cluster_centroids = average_centroids_gradient_by_cluster_size(
                self.cluster_centroids,
                tf.stop_gradient(cluster_sizes),
            )
        else:
            raise ValueError(
                f"self.cluster_gradient_aggregation="
                f"{self.cluster_gradient_aggregation} not implemented."
            )

        # Gather the clustered weights based on cluster centroids and pulling indices
        clustered_weight = tf.gather(cluster_centroids, pulling_indices)

        # Add an estimated gradient to the original weight
        clustered_weight = add_gradient_to_original_weight(
            clustered_weight,
            # Fix the bug with MirroredVariable and tf.custom_gradient:
            # tf.identity will transform a MirroredVariable into a Variable
            tf.identity(original_weight),
        )

        return clustered_weight


centroids = tf.Variable([-1.0, 0.0, 0.5, 2.0], dtype=tf.float64)
averaging = ClusteringAlgorithm(centroids, GradientAggregation.AVG)


def clustered_weight(weight):
    return averaging.get_clustered_weight(averaging.get_pulling_indices(weight), weight)


EXAMPLES = {"clustered_weight": ([[0.4, -0.9, 1.7], [0.1, 2.6, -0.2]],)}
